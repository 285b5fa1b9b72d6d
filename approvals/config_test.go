package approvals

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseConsoleConfig(t *testing.T) {
	tests := []struct {
		cfg     string
		want    ConsoleOptions
		wantErr string // substring; the error names the key
	}{
		{cfg: ``, want: ConsoleOptions{}},
		{cfg: `null`, want: ConsoleOptions{}},
		{cfg: `{}`, want: ConsoleOptions{}},
		// PRODUCT.md's example.
		{cfg: `{"timeout":"10m"}`, want: ConsoleOptions{Timeout: 10 * time.Minute}},
		{cfg: `{"max_pending":5,"timeout":"30s"}`, want: ConsoleOptions{MaxPending: 5, Timeout: 30 * time.Second}},
		{cfg: `{"max_pending":null}`, want: ConsoleOptions{}},
		{cfg: `{"timout":"10m"}`, wantErr: "config.timout: unknown key"},
		{cfg: `{"max_pending":1,"max_pending":2}`, wantErr: "config.max_pending: duplicate key"},
		{cfg: `{"max_pending":0}`, wantErr: "config.max_pending: must be between"},
		{cfg: `{"max_pending":1.5}`, wantErr: "config.max_pending: must be an integer"},
		{cfg: `{"max_pending":"10"}`, wantErr: "config.max_pending: must be an integer"},
		{cfg: `{"max_pending":100001}`, wantErr: "config.max_pending: must be between"},
		{cfg: `{"timeout":600}`, wantErr: "config.timeout: must be a Go duration"},
		{cfg: `{"timeout":"soon"}`, wantErr: "config.timeout: invalid duration"},
		{cfg: `{"timeout":"-1s"}`, wantErr: "config.timeout: must be positive"},
		{cfg: `[]`, wantErr: "config: must be an object"},
		{cfg: `{`, wantErr: "config: not valid JSON"},
		{cfg: `{"a b":1}`, wantErr: `config["a b"]: unknown key`},
	}
	for _, tt := range tests {
		got, err := ParseConsoleConfig([]byte(tt.cfg))
		if tt.wantErr != "" {
			var ce *ConfigError
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.As(err, &ce) {
				t.Errorf("%s: err = %v, want %q", tt.cfg, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got.MaxPending != tt.want.MaxPending || got.Timeout != tt.want.Timeout {
			t.Errorf("%s: got %+v, %v", tt.cfg, got, err)
		}
	}
	c, err := NewConsoleFromConfig([]byte(`{"max_pending":3,"timeout":"10m"}`))
	if err != nil || c.max != 3 || c.timeout != 10*time.Minute {
		t.Fatalf("NewConsoleFromConfig = %+v, %v", c, err)
	}
	if c, err := NewConsoleFromConfig(nil); err != nil || c.max != DefaultMaxPending {
		t.Fatalf("default max = %v, %v", c, err)
	}
	if _, err := NewConsoleFromConfig([]byte(`{"nope":1}`)); err == nil {
		t.Fatal("unknown key accepted")
	}
}

func TestWebhookConfig(t *testing.T) {
	env := map[string]string{"TOK": "t"}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		cfg, wantErr string
	}{
		{`{"url":"https://approver.test/hook"}`, ""},
		{`{"url":"http://127.0.0.1:9/x","timeout":"2s","headers_from_env":{"Authorization":"TOK"}}`, ""},
		{`{}`, "config.url: required"},
		{`{"url":5}`, "config.url: must be a string"},
		{`{"url":"ftp://x"}`, "config.url: must be an absolute http or https URL"},
		{`{"url":"/relative"}`, "config.url: must be an absolute"},
		{`{"url":"https://u:p@x/"}`, "config.url: must not carry credentials"},
		{`{"url":"https://x","verdict_path":"a"}`, "config.verdict_path: unknown key"},
		{`{"url":"https://x","timeout":"0s"}`, "config.timeout: must be positive"},
		{`{"url":"https://x","headers_from_env":[]}`, "config.headers_from_env: must be an object"},
		{`{"url":"https://x","headers_from_env":{"Bad Header":"TOK"}}`, `config.headers_from_env["Bad Header"]: invalid header name`},
		{`{"url":"https://x","headers_from_env":{"X-Key":""}}`, "config.headers_from_env.X-Key: must name an environment variable"},
		{`{"url":"https://x","headers_from_env":{"X-Key":"UNSET"}}`, "config.headers_from_env.X-Key: environment variable UNSET is not set"},
		{`{"url":"https://x","headers_from_env":{"X-Key":"TOK","X-Key":"TOK"}}`, "duplicate key"},
	}
	for _, tt := range tests {
		_, err := NewWebhook([]byte(tt.cfg), getenv, nil)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.cfg, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: err = %v, want %q", tt.cfg, err, tt.wantErr)
		}
	}
	if _, err := NewWebhook([]byte(`{"url":"https://x","headers_from_env":{"X-Key":"TOK"}}`), nil, nil); err == nil {
		t.Error("headers without getenv accepted")
	}
}

func FuzzParseConsoleConfig(f *testing.F) {
	for _, s := range []string{`{"max_pending":5,"timeout":"10m"}`, `{"x":1}`, `null`, `{"timeout":"-1h"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, cfg []byte) {
		o, err := ParseConsoleConfig(cfg)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.HasPrefix(ce.Path, "config") {
				t.Fatalf("error %v has no config path", err)
			}
			return
		}
		if o.MaxPending < 0 || o.MaxPending > MaxPendingLimit || o.Timeout < 0 {
			t.Fatalf("accepted %q as %+v", cfg, o)
		}
	})
}

func FuzzWebhookConfig(f *testing.F) {
	for _, s := range []string{`{"url":"https://x","timeout":"1s","headers_from_env":{"A":"B"}}`, `{"url":"http://[::1]:80/"}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, cfg []byte) {
		w, err := parseWebhookConfig(cfg)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T", err)
			}
			return
		}
		if w.url == "" || w.timeout < 0 || len(w.order) != len(w.headers) {
			t.Fatalf("accepted %q as %+v", cfg, w)
		}
	})
}
