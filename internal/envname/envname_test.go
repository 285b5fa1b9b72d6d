package envname

import (
	"regexp"
	"testing"
)

func TestValid(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	for _, s := range []string{"A", "_", "a_1", "HOOKS_TOKEN", "Z9", "", "1A", "A-B", "A B", "Bearer sk-x", "A=", "é", "A\n", "a.b", "$X", "_9"} {
		if Valid(s) != re.MatchString(s) {
			t.Errorf("Valid(%q) = %v", s, Valid(s))
		}
	}
}

func FuzzValid(f *testing.F) {
	re := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	f.Add("HOOKS_TOKEN")
	f.Add("Bearer sk-proj-x")
	f.Fuzz(func(t *testing.T, s string) {
		if Valid(s) != re.MatchString(s) {
			t.Fatalf("Valid(%q) = %v", s, Valid(s))
		}
	})
}

func TestShown(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"OPENAI_API_KEY", "OPENAI_API_KEY"},
		{"HOOKSPROXY_IDENTITY_KEY", "HOOKSPROXY_IDENTITY_KEY"},
		{"ghp_16C7e42F292c6912E7710c838347Ae178B4a", "of 40 characters (not shown: it reads like a secret)"},
		{"sk_live_51HxxxxxxxxxxxxxxxxxxxxxxxxxxxxxQ", "of 41 characters (not shown: it reads like a secret)"},
	} {
		if got := Shown(tt.in); got != tt.want {
			t.Errorf("Shown(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
