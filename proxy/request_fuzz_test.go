package proxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

const toolCompletion = `{"id":"chatcmpl-3","object":"chat.completion","created":3,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_z","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}]}`

// fuzzAnswers are the upstream's answers a fuzz case picks from, json and
// stream: well-formed, tool calls, and broken ones.
var fuzzAnswers = [][2]string{
	{plainCompletion, textStream},
	{toolCompletion, toolStream},
	{plainCompletion[:len(plainCompletion)/2], textStream[:len(textStream)/2]},
	{`{"choices":[]}`, "data: {}\n\ndata: [DONE]\n\n"},
	{`not json`, "event: error\ndata: {\"error\":{\"message\":\"x\"}}\n\n"},
}

// fixedTransport answers every upstream call with a canned answer, json or
// stream as the request asks, without a network.
type fixedTransport struct{ answer [2]string }

func (f fixedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(r.Body)
	_ = r.Body.Close()
	body, ct := f.answer[0], "application/json"
	if gjson.GetBytes(b, "stream").Bool() {
		body, ct = f.answer[1], "text/event-stream"
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ct}}, Body: io.NopCloser(strings.NewReader(body)),
		ContentLength: -1, Request: r}, nil
}

// FuzzChatRequest sends arbitrary bodies through the chat handler, against
// an upstream answer picked from fuzzAnswers: it never panics, answers either a 200 the records account for or an
// OpenAI-shaped error, and every session it starts it ends (an
// agent_startup record has its agent_shutdown).
func FuzzChatRequest(f *testing.F) {
	for _, s := range []string{hello, helloStream, helloStreamUsage, `{}`, `[]`, `null`, `{"messages":[]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"x"}}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"}]}`,
		`{"model":"m","messages":[{"role":"tool","tool_call_id":"zz","content":"r"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"\ud800"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"a","content":"b"}]}`,
		`{"model":1e400,"messages":[{"role":"user","content":"q"}]}`,
		`{"model":"m","stream":"yes","messages":[{"role":"user","content":"q"}]}`,
		`{"model":"m","n":2,"messages":[{"role":"user","content":"q"}]}`,
	} {
		f.Add([]byte(s), false, uint8(0))
		f.Add([]byte(s), true, uint8(1))
	}
	for i := range fuzzAnswers {
		f.Add([]byte(hello), false, uint8(i))
		f.Add([]byte(helloStream), false, uint8(i))
	}
	up, _ := url.Parse("http://upstream.invalid")
	f.Fuzz(func(t *testing.T, body []byte, named bool, answer uint8) {
		sink := points.NewMemorySink(0)
		em, err := points.NewEmitter(points.Config{Identity: points.JCSSHA256(), Bindings: []points.Binding{allowAll()}, Sink: sink})
		if err != nil {
			t.Fatal(err)
		}
		s := New(Options{Upstream: up, Transport: fixedTransport{fuzzAnswers[int(answer)%len(fuzzAnswers)]}, Emitter: em, Agent: points.Agent{ID: "a", Framework: "f"}})
		s.Start()
		defer s.Close()
		req := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if named {
			req.Header.Set("X-Agent-Hooks-Session", "fuzz")
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		out := rec.Body.Bytes()
		switch {
		case rec.Code == http.StatusOK:
			if len(sink.Records()) == 0 {
				t.Fatalf("200 with no record: %s", out)
			}
		case rec.Code >= 400 && rec.Code <= 599:
			if !gjson.ValidBytes(out) || gjson.GetBytes(out, "error.message").Type != gjson.String || gjson.GetBytes(out, "error.type").Type != gjson.String {
				t.Fatalf("status %d with a body that is not an OpenAI error: %q", rec.Code, out)
			}
		default:
			t.Fatalf("status %d", rec.Code)
		}
		if named {
			return // a named session lives until /end or its idle timeout
		}
		starts, ends := 0, 0
		for _, r := range sink.Records() {
			switch r.InterceptionPoint {
			case points.AgentStartup:
				starts++
			case points.AgentShutdown:
				ends++
			}
		}
		// A header-less run that ends in tool calls stays open for its
		// follow-ups; one that answers or fails ends here.
		if !bytes.Contains(out, []byte(`"finish_reason":"tool_calls"`)) && starts != ends {
			t.Fatalf("status %d: %d agent_startup, %d agent_shutdown", rec.Code, starts, ends)
		}
	})
}
