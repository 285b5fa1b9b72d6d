package interceptors

import (
	"net/netip"
	"strings"
	"testing"
)

// legacyIPv4 against the WHATWG IPv4 parser's answers for the forms it
// names, including the edges (a bare 0x, the last part filling the rest).
func TestLegacyIPv4(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want "" = not an IPv4 address
	}{
		{"0x", "0.0.0.0"},
		{"0x.0x.0x.0x", "0.0.0.0"},
		{"0", "0.0.0.0"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"0x7f.1", "127.0.0.1"},
		{"017700000001", "127.0.0.1"},
		{"4294967295", "255.255.255.255"},
		{"4294967296", ""},
		{"1.2.3.256", ""},
		{"1.2.65536", ""},
		{"256.1", ""},
		{"1.2.3.4.5", ""},
		{"1..2", ""},
		{"+1.2.3.4", ""},
		{"08", ""},
		{"0xg", ""},
		{"example.com", ""},
	} {
		ip, ok := legacyIPv4(tc.in)
		got := ""
		if ok {
			got = ip.String()
		}
		if got != tc.want {
			t.Errorf("legacyIPv4(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzCanonicalHost: any host string canonicalizes without panicking, to
// a fixed point (a second pass changes nothing, so a list entry and a
// request host meet in one spelling), and an address comes out in the
// standard form, never mapped.
func FuzzCanonicalHost(f *testing.F) {
	for _, s := range []string{"evil.example.", "EVIL.example", "evil\u3002example", "\uff45vil.example",
		"2852039166", "0xa9fea9fe", "0251.0376.0251.0376", "169.254.43518", "[::ffff:169.254.169.254]",
		"::ffff:a9fe:a9fe", "xn--bcher-kva.example", "bücher.example", "0x", "", ".", "a..b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		c := canonicalHost(host)
		if again := canonicalHost(c); again != c {
			t.Fatalf("canonicalHost(%q) = %q, but canonicalHost(%q) = %q", host, c, c, again)
		}
		if ip, err := netip.ParseAddr(c); err == nil {
			if ip.Is4In6() || ip.String() != c {
				t.Fatalf("canonicalHost(%q) = %q, not a standard unmapped address", host, c)
			}
		}
		if strings.HasSuffix(c, ".") && c != "." {
			t.Fatalf("canonicalHost(%q) = %q keeps a trailing dot", host, c)
		}
	})
}

// FuzzWhatwgSpecial: reading a candidate as WHATWG does never panics, and
// for a special scheme leaves no backslash and exactly "://" after it.
func FuzzWhatwgSpecial(f *testing.F) {
	for _, s := range []string{"https:/evil.example/x", `https:\\evil.example`, "https://a\\@b/", "mailto:x@y", "no scheme", "HTTP:x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cand string) {
		out := whatwgSpecial(cand)
		i := strings.IndexByte(cand, ':')
		if i < 0 {
			if out != cand {
				t.Fatalf("no scheme, changed: %q -> %q", cand, out)
			}
			return
		}
		switch strings.ToLower(cand[:i]) {
		case "http", "https", "ws", "wss", "ftp":
			if strings.Contains(out, `\`) || !strings.HasPrefix(out[i:], "://") || strings.HasPrefix(out[i+3:], "/") {
				t.Fatalf("whatwgSpecial(%q) = %q", cand, out)
			}
		}
	})
}

// FuzzRFC3986Host: the curl-style reading never panics and names only
// hosts a client could connect to (no backslash, control character or
// authority delimiter left in them).
func FuzzRFC3986Host(f *testing.F) {
	for _, s := range []string{`https://a\@b/x`, `https:/\a\@b`, `https:a\@b`, `https:///a\@b`, `https://a\n`, `mailto:a@b`, `https://[::1]:8\@x`, "x:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cand string) {
		host, ok := rfc3986Host(cand)
		if !ok {
			return
		}
		if host == "" || strings.ContainsAny(host, "\\/?#@ \t\r\n") {
			t.Fatalf("rfc3986Host(%q) = %q", cand, host)
		}
	})
}

// FuzzWhatwgWholeHost: the whole-value reading never panics and names only
// hosts with no space, control character or delimiter in them.
func FuzzWhatwgWholeHost(f *testing.F) {
	for _, s := range []string{"https://a.com- @evil.com/x", "\fhttps://a.com@evil.com", "https:evil.com", "https://[::1]:8/x", "ftp://a b/", "mailto:x@y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		host, ok := whatwgWholeHost(v)
		if ok && (host == "" || strings.ContainsAny(host, "/?#@\\ \t\r\n")) {
			t.Fatalf("whatwgWholeHost(%q) = %q", v, host)
		}
	})
}
