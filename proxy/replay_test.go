package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"gopkg.in/yaml.v3"

	"github.com/hooksproxy/hooksproxy/points"
	"github.com/hooksproxy/hooksproxy/sse"
)

// recordedStreams returns the upstream streams to replay: the real OpenAI
// recordings and the constructed fixtures, by name.
func recordedStreams(t *testing.T) map[string]string {
	out := map[string]string{}
	files, _ := filepath.Glob("testdata/openai-recorded/*.yaml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Interactions []struct {
				Response struct {
					Body string `yaml:"body"`
				} `yaml:"response"`
			} `yaml:"interactions"`
		}
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i, in := range doc.Interactions {
			if strings.HasPrefix(in.Response.Body, "data:") {
				out[fmt.Sprintf("%s#%d", filepath.Base(f), i)] = in.Response.Body
			}
		}
	}
	for _, name := range []string{"tool-call-dotnet.sse", "parallel-tools.sse", "interleaved-tools.sse", "refusal.sse", "logprobs.sse", "reasoning-annotations.sse", "framing-escapes.sse"} {
		b, err := os.ReadFile(filepath.Join("testdata/chatstream", name))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = string(b)
	}
	// finish_reason length: cut a recorded text stream short the way OpenAI does.
	out["length"] = textStream[:strings.LastIndex(textStream, chunk(`{}`, "stop"))] + chunk(`{}`, "length") + "data: [DONE]\n\n"
	return out
}

// chunkings splits a stream into the writes an upstream makes.
var chunkings = map[string]func(string) []string{
	"whole": func(s string) []string { return []string{s} },
	"1byte": func(s string) []string {
		out := make([]string, len(s))
		for i := 0; i < len(s); i++ { // bytes, not runes: split inside UTF-8 sequences too
			out[i] = s[i : i+1]
		}
		return out
	},
	"every-line-end": func(s string) []string {
		var out []string
		last := 0
		for i := 0; i < len(s); i++ {
			if s[i] == '\r' || s[i] == '\n' {
				out = append(out, s[last:i], s[i:i+1])
				last = i + 1
			}
		}
		return append(out, s[last:])
	},
	"crlf": func(s string) []string {
		c := strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
		var out []string
		for i := 0; i < len(c); i += 5 {
			out = append(out, c[i:min(i+5, len(c))])
		}
		return out
	},
}

func replayUpstream(t *testing.T, writes []string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, p := range writes {
			_, _ = io.WriteString(w, p)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func eventData(t *testing.T, b []byte) []string {
	rd := sse.NewReader(bytes.NewReader(b), 0)
	var out []string
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("SSE parse: %v", err)
		}
		out = append(out, string(ev.Data))
	}
}

// TestRecordedStreamsReplay: allowed streams are released event for event,
// whatever the upstream's chunking; a deny releases no content byte; a
// transform reaches the client as exactly the transformed content.
func TestRecordedStreamsReplay(t *testing.T) {
	for name, stream := range recordedStreams(t) {
		want := eventData(t, []byte(stream))
		for i, d := range want {
			// A JSON payload over several data lines is released on one.
			var c bytes.Buffer
			if strings.Contains(d, "\n") && json.Compact(&c, []byte(d)) == nil {
				want[i] = c.String()
			}
		}
		cs := NewChatStream(1 << 24)
		if _, err := cs.ReadFrom(strings.NewReader(stream)); err != nil {
			t.Fatalf("%s: fixture does not assemble: %v", name, err)
		}
		comp, _ := cs.Assemble()
		content := gjson.GetBytes(comp, "choices.0.message.content").Str
		for how, split := range chunkings {
			t.Run(name+"/"+how, func(t *testing.T) {
				up := replayUpstream(t, split(stream))
				p := newProxy(t, up.URL, allowAll())
				// The recordings were made with usage asked for; a client
				// that does not ask gets no usage chunk (TestStreamUsage).
				resp, body := post(t, p.URL, helloStreamUsage)
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, body)
				}
				if v := viewCompletion(comp); len(v.unjudged) > 0 || cs.Unjudged() {
					// Members no point judges (reasoning text, annotations,
					// SSE ids) are removed, so the stream is re-derived
					// without them.
					rc := NewChatStream(1 << 24)
					if _, err := rc.ReadFrom(bytes.NewReader(body)); err != nil {
						t.Fatalf("client re-read: %v", err)
					}
					got, _ := rc.Assemble()
					msg := gjson.GetBytes(got, "choices.0.message")
					msg.ForEach(func(k, v gjson.Result) bool {
						if judged := map[string]bool{"role": true, "content": true, "tool_calls": true, "refusal": true}; !judged[k.Str] && v.Type != gjson.Null {
							t.Errorf("unjudged member %s released", k.Str)
						}
						return true
					})
					if msg.Get("content").Str != content {
						t.Fatalf("content changed: %q", msg.Get("content").Str)
					}
				} else if got := eventData(t, body); strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Fatalf("released events differ from the upstream's")
				}

				// Deny at post_model_call: 403 and no content byte.
				pd := newProxy(t, up.URL, allowAll(points.AgentStartup, points.Input, points.PreModelCall, points.Output, points.AgentShutdown, points.PreToolCall),
					at(points.PostModelCall, "deny", func(*points.Context) (points.Verdict, error) { return points.Deny("blocked_model_output", ""), nil }))
				resp, body = post(t, pd.URL, helloStream)
				if resp.StatusCode != 403 || bytes.Contains(body, []byte("data:")) || (len(content) > 3 && bytes.Contains(body, []byte(content[:len(content)/2]))) {
					t.Fatalf("deny: %d %s", resp.StatusCode, body)
				}

				// Transform the content: the client's own SSE parse sees exactly it.
				if content == "" {
					return
				}
				pt := newProxy(t, up.URL, allowAll(points.AgentStartup, points.Input, points.PreModelCall, points.Output, points.AgentShutdown, points.PreToolCall),
					at(points.PostModelCall, "rewrite", func(*points.Context) (points.Verdict, error) {
						return points.Replace("$target.content", json.RawMessage(`"rewritten \u00e9 \"quoted\""`)), nil
					}))
				resp, body = post(t, pt.URL, helloStream)
				if resp.StatusCode != 200 {
					t.Fatalf("transform: %d %s", resp.StatusCode, body)
				}
				got := NewChatStream(1 << 24)
				if _, err := got.ReadFrom(bytes.NewReader(body)); err != nil {
					t.Fatalf("client re-read: %v", err)
				}
				gc, err := got.Assemble()
				if err != nil {
					t.Fatal(err)
				}
				if c := gjson.GetBytes(gc, "choices.0.message.content").Str; c != "rewritten é \"quoted\"" {
					t.Fatalf("content %q", c)
				}
			})
		}
	}
}

func TestMultipleChoicesFailClosed(t *testing.T) {
	b, err := os.ReadFile("testdata/chatstream/n2-choices.sse")
	if err != nil {
		t.Fatal(err)
	}
	up := replayUpstream(t, []string{string(b)})
	p := newProxy(t, up.URL, allowAll())
	resp, body := post(t, p.URL, helloStream)
	if resp.StatusCode != 503 || bytes.Contains(body, []byte("data:")) {
		t.Fatalf("a second, unjudged choice must not be released: %d %s", resp.StatusCode, body)
	}
	_ = context.Background
}
