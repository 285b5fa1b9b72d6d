package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// An upstream error is relayed whole with its status and headers, or, when
// its body cannot be read whole, with its status and an OpenAI-shaped body
// saying so: never as truncated JSON that looks complete.
func TestRelayErrorBody(t *testing.T) {
	const small = `{"error":{"message":"rate limited","type":"requests","code":"rate_limit_exceeded"}}`
	for _, tc := range []struct {
		name   string
		handle func(w http.ResponseWriter)
		want   string // the body's error.code; "" = the upstream's body as sent
	}{
		{"whole", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(429)
			_, _ = io.WriteString(w, small)
		}, ""},
		{"over the limit", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(429)
			_, _ = io.WriteString(w, `{"error":{"message":"`+strings.Repeat("E", 4096)+`"}}`)
		}, "upstream_error_body_unreadable"},
		{"cut short", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "7")
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(429)
			_, _ = io.WriteString(w, `{"error":{"mess`)
			// the handler returns with 985 bytes owed: the connection is cut
		}, "upstream_error_body_unreadable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				tc.handle(w)
			}))
			defer up.Close()
			em, err := points.NewEmitter(points.Config{Identity: points.JCSSHA256(), Bindings: []points.Binding{allowAll()}, Sink: points.NewMemorySink(0)})
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(up.URL)
			s := New(Options{Upstream: u, Emitter: em, MaxBufferedResponseBytes: 1024, Agent: points.Agent{ID: "a", Framework: "f"}})
			s.Start()
			hs := httptest.NewServer(s)
			defer func() { hs.Close(); s.Close() }()
			resp, body := post(t, hs.URL, hello)
			if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" {
				t.Fatalf("status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
			}
			if tc.want == "" {
				if string(body) != small {
					t.Fatalf("body %s", body)
				}
				return
			}
			if !gjson.ValidBytes(body) || gjson.GetBytes(body, "error.code").Str != tc.want {
				t.Fatalf("body %s", body)
			}
		})
	}
}

// The upstream sees the request id the records and the response carry:
// the client's when it is sane, the proxy's where the client's was refused.
func TestUpstreamGetsRecordedRequestID(t *testing.T) {
	got := make(chan string, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		got <- strings.Join(r.Header.Values("X-Request-Id"), "|")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, plainCompletion)
	}))
	defer up.Close()
	p := newProxy(t, up.URL, allowAll())
	for _, sent := range []string{"client-id-1", `a b"c<>`, strings.Repeat("x", 200)} {
		resp, _ := post(t, p.URL, hello, "X-Request-Id", sent)
		id := resp.Header.Get("X-Request-Id")
		if up := <-got; up != id {
			t.Errorf("sent %.20q: upstream got %q, response and records carry %q", sent, up, id)
		}
		if sent == "client-id-1" && id != sent {
			t.Errorf("a sane client id was replaced: %q", id)
		}
	}
}

// An answer in the other framing than the request asked for (a stream to
// stream: false, JSON to stream: true) is refused: the client's SDK could
// not decode it, and nothing of it is released.
func TestFramingMismatch(t *testing.T) {
	for _, tc := range []struct {
		name, req, answer string
		stream            bool
	}{
		{"stream to a json request", hello, textStream, true},
		{"json to a streaming request", helloStream, plainCompletion, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, _ := upstream(t, tc.answer, tc.stream, 64)
			p := newProxy(t, up.URL, allowAll())
			resp, body := post(t, p.URL, tc.req)
			if resp.StatusCode != 502 || gjson.GetBytes(body, "error.code").Str != "upstream_invalid_response" || strings.Contains(string(body), "secret") {
				t.Fatalf("status %d body %s", resp.StatusCode, body)
			}
			if n := count(p.sink, points.PostModelCall); n != 0 {
				t.Fatalf("%d post_model_call records for an errored call", n)
			}
		})
	}
}

// A json answer whose tool call carries arguments that are a number (or an
// id or name that is not a string) is refused: the points would judge
// empty arguments while the client got them as sent. A stream with such a
// delta already is. Arguments sent as an object (llama.cpp's server) are
// turned into the string the chat wire has, judged and released so.
func TestToolCallNonStringMembersRefused(t *testing.T) {
	for _, tc := range []struct{ name, call string }{
		{"number arguments", `{"id":"call_1","type":"function","function":{"name":"fetch","arguments":4111111111111111}}`},
		{"number id", `{"id":7,"type":"function","function":{"name":"fetch","arguments":"{}"}}`},
		{"array name", `{"id":"call_1","type":"function","function":{"name":["fetch"],"arguments":"{}"}}`},
		{"function a string", `{"id":"call_1","type":"function","function":"fetch(https://evil.example)"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
				tc.call + `]},"finish_reason":"tool_calls"}]}`
			up, _ := upstream(t, answer, false, 0)
			p := newProxy(t, up.URL, allowAll())
			resp, body := post(t, p.URL, hello)
			if resp.StatusCode != 502 || gjson.GetBytes(body, "error.code").Str != "upstream_invalid_response" || strings.Contains(string(body), "evil") {
				t.Fatalf("status %d body %s", resp.StatusCode, body)
			}
		})
	}
	// null arguments stay accepted (read as empty, as clients read them).
	answer := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"ping","arguments":null}}]},"finish_reason":"tool_calls"}]}`
	up, _ := upstream(t, answer, false, 0)
	p := newProxy(t, up.URL, allowAll())
	if resp, body := post(t, p.URL, hello); resp.StatusCode != 200 {
		t.Fatalf("null arguments: %d %s", resp.StatusCode, body)
	}
}

func TestToolCallObjectArgumentsStringified(t *testing.T) {
	answer := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"call_1","type":"function","function":{"name":"fetch","arguments":{"url": "https://x.example/a"}}}]},"finish_reason":"tool_calls"}]}`
	up, _ := upstream(t, answer, false, 0)
	var seen string
	judge := at(points.PostModelCall, "see", func(c *points.Context) (points.Verdict, error) {
		seen = c.Get("response.tool_calls.0.args.url").Str
		return points.Allow(), nil
	})
	p := newProxy(t, up.URL, judge, allowAll(points.AgentStartup, points.Input, points.PreModelCall, points.Output, points.AgentShutdown))
	resp, body := post(t, p.URL, hello)
	if resp.StatusCode != 200 || seen != "https://x.example/a" {
		t.Fatalf("status %d, judged url %q: %s", resp.StatusCode, seen, body)
	}
	if a := gjson.GetBytes(body, "choices.0.message.tool_calls.0.function.arguments"); a.Type != gjson.String || a.Str != `{"url":"https://x.example/a"}` {
		t.Fatalf("released arguments %s", a.Raw)
	}
}
