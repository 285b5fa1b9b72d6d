package app_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/proxy"
	"github.com/hooksproxy/hooksproxy/scripted"
	"github.com/hooksproxy/hooksproxy/sse"
)

// redactKey is a fake OpenAI project key: sk-proj- and 40 characters.
const redactKey = "sk-proj-Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0LmNbVcXz12"

// redactAnswer carries the key twice, split across many stream chunks, with
// non-ASCII text and JSON-escaped characters around it.
const redactAnswer = "Your key is " + redactKey + " — keep it \"safe\".\nÜbrigens: " + redactKey + "! ✓ done"

const redactConfig = `upstream: {base_url: UPSTREAM}
agent: {id: redact-agent}
hooks:
  declaration: agent-hooks-declaration/1.0
  bindings:
    - id: key-redaction
      kind: hooksproxy.content
      at: [post_model_call]
      config: {packs: {secrets: redact}}
    - id: allow-rest
      kind: hooksproxy.allow_all
`

// redactUpstream is a scripted model that answers redactAnswer in 5-byte
// content chunks.
func redactUpstream() *scripted.Server {
	s := scripted.New(scripted.Rule{Reply: scripted.Text(redactAnswer)})
	s.Chunk = 5
	return s
}

// post sends a chat request straight to url and returns the raw answer.
func post(t *testing.T, url string, body []byte) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// assemble checks that raw is a well-formed chat completion stream (every
// event a JSON chunk, then [DONE]) and reassembles it into a completion.
func assemble(t *testing.T, raw []byte) []byte {
	t.Helper()
	rd := sse.NewReader(bytes.NewReader(raw), 1<<20)
	events, done := 0, false
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("event %d: %v", events, err)
		}
		if done {
			t.Fatalf("event after [DONE]: %q", ev.Data)
		}
		if string(ev.Data) == "[DONE]" {
			done = true
			continue
		}
		if !gjson.ValidBytes(ev.Data) || gjson.GetBytes(ev.Data, "object").Str != "chat.completion.chunk" {
			t.Fatalf("event %d is not a chat.completion.chunk: %q", events, ev.Data)
		}
		events++
	}
	if !done || events < 2 {
		t.Fatalf("%d chunks, [DONE] %v", events, done)
	}
	cs := proxy.NewChatStream(1 << 20)
	if _, err := cs.ReadFrom(bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	out, err := cs.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRedactEndToEnd sends the key through hooksproxy.content {packs:
// {secrets: redact}} at post_model_call: the client gets the key masked and
// every other byte as the model sent it, streamed and not.
func TestRedactEndToEnd(t *testing.T) {
	const mask = "[REDACTED:openai_key]"
	wantContent := strings.ReplaceAll(redactAnswer, redactKey, mask)
	for _, stream := range []bool{true, false} {
		name := "plain"
		if stream {
			name = "stream"
		}
		t.Run(name, func(t *testing.T) {
			// What the model sends, asked directly (a twin upstream, so ids match).
			direct := httptest.NewServer(redactUpstream())
			defer direct.Close()
			body := chatBody("what is my key?", stream)
			_, raw := post(t, direct.URL, body)

			up := httptest.NewServer(redactUpstream())
			defer up.Close()
			path := filepath.Join(t.TempDir(), "redact.yaml")
			if err := os.WriteFile(path, []byte(strings.Replace(redactConfig, "UPSTREAM", up.URL, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			p := startAppFile(t, path)
			r, err := p.chat(context.Background(), body)
			if err != nil {
				t.Fatal(err)
			}
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if bytes.Contains(r.body, []byte(redactKey)) || bytes.Contains(r.body, []byte(redactKey[8:20])) {
				t.Fatalf("the key reached the client: %s", r.body)
			}

			got, want := r.body, raw
			if stream {
				if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
					t.Fatalf("Content-Type %q", ct)
				}
				got, want = assemble(t, r.body), assemble(t, raw)
			}
			if !bytes.Contains(want, []byte(redactKey)) {
				t.Fatalf("the upstream does not send the key: %s", want)
			}
			if c := gjson.GetBytes(got, "choices.0.message.content").String(); c != wantContent {
				t.Fatalf("content\n %q\nwant\n %q", c, wantContent)
			}
			// Every other byte as the model sent it: the whole completion
			// equals the model's with only the key replaced.
			want = bytes.ReplaceAll(want, []byte(redactKey), []byte(mask))
			if !bytes.Equal(got, want) {
				t.Fatalf("completion differs beyond the mask\n got %s\nwant %s", got, want)
			}

			rec := p.findRecord("post_model_call", "transform", "content_redacted")
			if rec == nil || rec.Verdict.Transform == nil {
				t.Fatal("no post_model_call transform record")
			}
		})
	}
}
