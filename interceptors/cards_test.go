package interceptors

import (
	"testing"
)

// TestCardSpans: what the card detector masks, beside other numbers and
// with the separators text copied from documents has.
func TestCardSpans(t *testing.T) {
	ms := maskSet{patterns: packPatterns(PackPII)[:1], mask: "[C]"}
	tests := []struct{ name, in, want string }{
		{"compact", "4111111111111111", "[C]"},
		{"compact then CVV", "4111111111111111 123", "[C] 123"},
		{"grouped then CVV", "4111-1111-1111-1111 123", "[C] 123"},
		{"CVV first", "cvv 123 4111111111111111", "cvv 123 [C]"},
		{"quantity first", "qty 2 4111111111111111", "qty 2 [C]"},
		{"digit glued to a word before", "mc2 2223003122003222", "mc2 [C]"},
		{"13 digits", "visa13 4222222222222", "visa13 [C]"},
		{"two compact cards", "4111111111111111 5555555555554444", "[C] [C]"},
		{"two grouped cards", "4111 1111 1111 1111 5555 5555 5555 4444", "[C] [C]"},
		{"compact and grouped", "card 4111111111111111 123 and 4111 1111 1111 1111", "card [C] 123 and [C]"},
		{"dots", "4111.1111.1111.1111", "[C]"},
		{"no-break spaces", "4111\u00a01111\u00a01111\u00a01111", "[C]"},
		{"narrow no-break spaces", "4111\u202f1111\u202f1111\u202f1111", "[C]"},
		{"en dashes", "4111\u20131111\u20131111\u20131111", "[C]"},
		{"underscore prefix", "card_4111111111111111", "card_[C]"},
		{"amex 4-6-5", "3782 822463 10005", "[C]"},
		{"amex then CID", "3782 822463 10005 1234", "[C] 1234"},
		{"19 digits 4-4-4-4-3", "6011 0009 9013 9424 124", "[C]"},
		{"16 digits then CVV, not 19", "6011 0009 9013 9424 123", "[C] 123"},
		{"card in a sentence", "paid with 5555-5555-5555-4444, thanks", "paid with [C], thanks"},
		{"after a date", "2024-01-15 4111 1111 1111 1111", "2024-01-15 [C]"},
		{"expiry with a slash", "4111 1111 1111 1111 12/27", "[C] 12/27"},

		{"not: 20 digits", "order 12345678901234567890", "order 12345678901234567890"},
		{"not: Luhn fails", "order 4111111111111112 123", "order 4111111111111112 123"},
		{"not: letter after", "4111111111111111x", "4111111111111111x"},
		{"not: hex", "0x4111111111111111", "0x4111111111111111"},
		{"not: a four-digit group before", "1234 4111 1111 1111 1111", "1234 4111 1111 1111 1111"},
		{"not: a four-digit group after", "4111 1111 1111 1111 2222", "4111 1111 1111 1111 2222"},
		{"not: years", "2019 2020 2021 2022 2023", "2019 2020 2021 2022 2023"},
		{"not: mixed separators", "4111 1111-1111 1111", "4111 1111-1111 1111"},
		{"not: issuer 1", "1111 1111 1111 1117", "1111 1111 1111 1117"},
		{"not: repeated digit", "4444444444444444", "4444444444444444"},
		{"not: grouped long id", "1234 5678 9012 3456 7890 1234", "1234 5678 9012 3456 7890 1234"},
		{"not: decimal", "3.14159265358979", "3.14159265358979"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, _ := ms.apply(newText(tt.in))
			if got != tt.want {
				t.Errorf("%q -> %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// FuzzCardSpans: the spans are ordered, disjoint, on digit boundaries, and
// each holds 13-19 digits that pass Luhn.
func FuzzCardSpans(f *testing.F) {
	for _, s := range []string{
		"4111111111111111 123", "qty 2 4111111111111111", "4111 1111 1111 1111 5555 5555 5555 4444",
		"4111\u00a01111\u00a01111\u00a01111", "4111\u20131111\u20131111\u20131111", "card_4111111111111111",
		"1234 4111 1111 1111 1111", "2019 2020 2021 2022 2023", "3782 822463 10005 1234", "4111.1111.1111.", "\xe2\x80", "4\xc2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		at := 0
		for _, sp := range cardSpans(s) {
			if sp[0] < at || sp[1] <= sp[0] || sp[1] > len(s) {
				t.Fatalf("span %v after %d in %q", sp, at, s)
			}
			at = sp[1]
			v := s[sp[0]:sp[1]]
			d := digitsOf(v)
			if !isDigit(v[0]) || !isDigit(v[len(v)-1]) || len(d) < 13 || len(d) > 19 || !luhn(d) {
				t.Fatalf("span %q in %q is no card", v, s)
			}
		}
	})
}
