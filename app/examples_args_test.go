package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// The argument rules of the examples hold against the spellings that reach
// the same place: users copy these files, so their comments' promises are
// tested through the host API's pre_tool_call.
func TestExampleArgumentRules(t *testing.T) {
	for _, tc := range []struct {
		file, tool, arg, reason string
		allowed, refused        []string
	}{
		{"tool-governance.yaml", "read_file", "path", "path_not_allowed",
			[]string{"/home/me/notes.txt", "/srv/data/etc/x", "/etcetera", "/home/.hidden", "/home/a..b"},
			[]string{"/etc/passwd", "//etc/passwd", "/./etc/passwd", "/etc", "/root/.ssh/id_rsa", "/proc/self/environ",
				"/var/../etc/passwd", "/home/./x", "etc/passwd", "../etc/passwd", "./x", ""}},
		{"egress-guard.yaml", "fetch_url", "url", "insecure_url",
			[]string{"https://docs.python.org/3/", "HTTPS://docs.python.org/3/"},
			[]string{"http://docs.python.org/3/", "HTTP://docs.python.org/3/", "Http://docs.python.org/", "ftp://docs.python.org/3/", "docs.python.org/3/"}},
	} {
		p, _ := startExample(t, tc.file)
		for i, v := range append(append([]string(nil), tc.allowed...), tc.refused...) {
			want := i < len(tc.allowed)
			t.Run(fmt.Sprintf("%s/%q", tc.file, v), func(t *testing.T) {
				args, _ := json.Marshal(map[string]string{tc.arg: v})
				url := fmt.Sprintf("%s/agent-hooks/v1/sessions/args-%d/tool-calls/c%d/pre", p.srv.URL, i, i)
				resp, err := http.Post(url, "application/json", strings.NewReader(`{"name":"`+tc.tool+`","args":`+string(args)+`}`))
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%d %s", resp.StatusCode, body)
				}
				got := gjson.GetBytes(body, "proceed").Bool()
				if got != want {
					t.Fatalf("proceed %v, want %v: %s", got, want, body)
				}
				if !want && gjson.GetBytes(body, "control_error.reason").Str != tc.reason {
					t.Fatalf("refused with %s, want %s", body, tc.reason)
				}
			})
		}
	}
}
