package urlcheck

import (
	"net/url"
	"testing"
)

func TestCredentials(t *testing.T) {
	for raw, refused := range map[string]bool{
		"https://opa.example/v1/data/hooks/verdict": false,
		"https://u:p@hooks.example/":                true,
		"https://hooks.example/?token=abc":          true,
		"https://hooks.example/?API-Key=abc":        true,
		"https://hooks.example/?Signature=x&a=1":    true,
		"https://hooks.example/?tenant=acme&v=2":    false,
		"https://hooks.example/?keyword=x":          false,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := Credentials(u) != ""; got != refused {
			t.Errorf("%s: refused %v, want %v", raw, got, refused)
		}
	}
}
