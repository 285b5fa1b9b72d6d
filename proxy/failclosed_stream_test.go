package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// A streamed custom tool call (a valid chunk of a kind hooksproxy does not
// mediate). README: "Tool calls other than function calls (custom tools)
// fail closed with 503 adapter_unsupported"; the json path does.
func TestStreamedCustomToolCallFailsClosed(t *testing.T) {
	custom := chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_2","type":"custom","custom":{"name":"delete_files","input":"rm -rf /"}}]}`, "") +
		chunk(`{}`, "tool_calls") + "data: [DONE]\n\n"
	up, _ := upstream(t, custom, true, 1<<20)
	p := seamProxy(t, up.URL, allowAll())
	r, b := post(t, p.URL, helloStream)
	t.Logf("status %d code %q points %v", r.StatusCode, gjson.GetBytes(b, "error.code").Str, points_(p.sink))
	if r.StatusCode != 503 || gjson.GetBytes(b, "error.code").Str != "host_error:adapter_unsupported" {
		t.Errorf("streamed custom tool: %d %s; want 503 host_error:adapter_unsupported as for json", r.StatusCode, b)
	}
	if count(p.sink, points.PostModelCall) != 1 {
		t.Errorf("post_model_call records %d, want 1 (the fail-closed deny)", count(p.sink, points.PostModelCall))
	}
}

// Close cancels a request whose client is still connected: the client gets
// 503 shutting_down, not an empty 200.
func TestCloseAnswersConnectedClient503(t *testing.T) {
	for _, sid := range []string{"named-1", ""} {
		t.Run("sid="+sid, func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			arrived := make(chan struct{}, 1)
			s, hs, sink := slowUpstreamProxy(t, release, func() { arrived <- struct{}{} })
			type answer struct {
				status int
				body   string
				err    error
			}
			got := make(chan answer, 1)
			go func() {
				req, _ := http.NewRequest("POST", hs.URL+"/v1/chat/completions", stringsReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
				req.Header.Set("Content-Type", "application/json")
				if sid != "" {
					req.Header.Set("X-Agent-Hooks-Session", sid)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					got <- answer{err: err}
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got <- answer{status: resp.StatusCode, body: string(b)}
			}()
			<-arrived
			s.Close()
			select {
			case a := <-got:
				t.Logf("client got status %d body %q err %v; points %v", a.status, a.body, a.err, points_(sink))
				if a.err != nil || a.status != http.StatusServiceUnavailable || gjson.Get(a.body, "error.code").Str != "shutting_down" {
					t.Errorf("a request cancelled by Close answered %d %q (%v); want 503 shutting_down", a.status, a.body, a.err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no answer")
			}
		})
	}
}

// stringsReader hides the length of s, so the request is sent chunked.
func stringsReader(s string) io.Reader { return &lenlessReader{s: s} }

type lenlessReader struct{ s string }

func (r *lenlessReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	n := copy(p, r.s)
	r.s = r.s[n:]
	return n, nil
}

// A stream past the proxy's own bound of choices plus tool calls
// (maxChatSlots): the proxy cannot hold it, like a stream over the buffer
// limit, which stays a 503 host error.
func TestStreamOverSlotBoundIsHostError(t *testing.T) {
	var b []byte
	b = append(b, chunk(`{"role":"assistant","content":null}`, "")...)
	for i := 0; i < maxChatSlots+8; i++ {
		b = append(b, chunk(`{"tool_calls":[{"index":`+itoa(i)+`,"id":"call_`+itoa(i)+`","type":"function","function":{"name":"f","arguments":"{}"}}]}`, "")...)
	}
	b = append(b, chunk(`{}`, "tool_calls")+"data: [DONE]\n\n"...)
	up, _ := upstream(t, string(b), true, 1<<20)
	p := seamProxy(t, up.URL, allowAll())
	r, body := post(t, p.URL, helloStream)
	if r.StatusCode != http.StatusServiceUnavailable || gjson.GetBytes(body, "error.code").Str != "host_error:streaming_unsupported" {
		t.Errorf("stream past the slot bound: %d %s; want 503 host_error:streaming_unsupported", r.StatusCode, body)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// Member names the path syntax reads specially (a backslash, a leading {
// or [) are removed like any other member no point judges, or the answer
// fails closed; they never reach the client (json and stream).
func TestOddlyNamedUnjudgedMembersAreRemoved(t *testing.T) {
	json := `{"id":"c","object":"chat.completion","created":1,"model":"m","{x}":"SECRET-1","[1]":"SECRET-2","a\\b":"SECRET-3",` +
		`"choices":[{"index":0,"x\\y":"SECRET-4","message":{"role":"assistant","content":"ok","a\\b":"SECRET-5","{x}":"SECRET-6","[x":"SECRET-7"},"finish_reason":"stop"}]}`
	up, _ := seqUpstream(t, json)
	p := seamProxy(t, up.URL, allowAll())
	r, b := post(t, p.URL, hello)
	if strings.Contains(string(b), "SECRET") {
		t.Fatalf("json: %d %s", r.StatusCode, b)
	}
	stream := chunk(`{"role":"assistant","content":"ok","a\\b":"SECRET-8","{y}":"SECRET-9"}`, "") + chunk(`{}`, "stop") + "data: [DONE]\n\n"
	ups, _ := upstream(t, stream, true, 16)
	ps := seamProxy(t, ups.URL, allowAll())
	r, b = post(t, ps.URL, helloStream)
	if strings.Contains(string(b), "SECRET") {
		t.Fatalf("stream: %d %s", r.StatusCode, b)
	}
}

// A stream whose shape the clients' accumulators read differently from the
// proxy's (a tool call's name given twice, a chunk with an empty id) is
// re-derived from what was judged, not replayed: no client can assemble a
// call or a text other than the one the points saw.
func TestIrregularStreamsAreRederived(t *testing.T) {
	deny := denyTool("delete_files")
	secret := at(points.Output, "secret", func(c *points.Context) (points.Verdict, error) {
		if strings.Contains(c.Get("output.content").Str, "SECRET-123") {
			return points.Deny("secret", ""), nil
		}
		return points.Allow(), nil
	})
	splitName := chunk(`{"role":"assistant","content":null}`, "") +
		chunk(`{"tool_calls":[{"index":0,"id":"call_Og1abc2def3ghi","type":"function","function":{"name":"get_weather","arguments":""}}]}`, "") +
		chunk(`{"tool_calls":[{"index":0,"id":"call_Og1abc2def3ghi","type":"function","function":{"name":"delete_files","arguments":"{\"path\":\"/\"}"}}]}`, "") +
		chunk(`{}`, "tool_calls") + "data: [DONE]\n\n"
	emptyID := chunk(`{"role":"assistant","content":"The code is SEC"}`, "") +
		strings.Replace(chunk(`{"content":"x"}`, ""), `"id":"chatcmpl-2"`, `"id":""`, 1) +
		chunk(`{"content":"RET-123."}`, "stop") + "data: [DONE]\n\n"
	for _, tc := range []struct {
		name, stream string
		bindings     []points.Binding
		mustNot      []string
	}{
		{"name given twice", splitName, []points.Binding{deny, allowAll()}, []string{`"name":"delete_files"`}},
		{"empty chunk id", emptyID, []points.Binding{secret, allowAll()}, []string{`"content":"RET-123."`, `"id":""`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, _ := upstream(t, tc.stream, true, 64)
			p := seamProxy(t, up.URL, tc.bindings...)
			r, b := post(t, p.URL, helloStream)
			if r.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", r.StatusCode, b)
			}
			if string(b) == tc.stream {
				t.Fatal("the stream was replayed as it came")
			}
			for _, s := range tc.mustNot {
				if strings.Contains(string(b), s) {
					t.Errorf("released stream carries %s:\n%s", s, b)
				}
			}
		})
	}
}

// A stream over max_buffered_response_bytes is refused in the words the
// json answer's refusal uses, so that an operator reading the 503 tells a
// size limit from an upstream that sent a broken stream.
func TestStreamOverLimitSaysSo(t *testing.T) {
	var b strings.Builder
	for range 200 {
		b.WriteString(chunk(`{"content":"`+strings.Repeat("x", 64)+`"}`, ""))
	}
	b.WriteString(chunk(`{}`, "stop") + "data: [DONE]\n\n")
	up, _ := upstream(t, b.String(), true, 1<<20)
	em, _ := points.NewEmitter(points.Config{Identity: points.JCSSHA256(), Bindings: []points.Binding{allowAll()}})
	u, _ := url.Parse(up.URL)
	s := New(Options{Upstream: u, Emitter: em, MaxBufferedResponseBytes: 4000})
	s.Start()
	hs := httptest.NewServer(s)
	t.Cleanup(func() { hs.Close(); s.Close() })
	r, body := post(t, hs.URL, helloStream)
	if r.StatusCode != 503 || gjson.GetBytes(body, "error.code").Str != "host_error:streaming_unsupported" ||
		!strings.Contains(gjson.GetBytes(body, "error.message").Str, "max_buffered_response_bytes") {
		t.Errorf("stream over the limit: %d %s; want 503 host_error:streaming_unsupported naming max_buffered_response_bytes", r.StatusCode, body)
	}
}
