package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hooksproxy/hooksproxy/points"
	"github.com/tidwall/gjson"
)

// Request shapes real clients send, parts re-derivation round trips,
// passthrough codings and lent buffers, from a review.

func TestReviewedClientShapesAccepted(t *testing.T) {
	u := `{"role":"user","content":"What is the weather in Paris?"}`
	call := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}`
	res := `{"role":"tool","tool_call_id":"call_1","content":"18C"}`
	wt := `{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}`
	for _, c := range []struct{ who, body string }{
		{"openai-go v3 ChatCompletionFunctionTool (type after function)", `{"messages":[` + u + `],"model":"gpt-4o-mini","tools":[{"function":{"name":"get_weather","parameters":{"type":"object"}},"type":"function"}]}`},
		{"npm openai tools:[] (user code passes an empty list)", `{"model":"m","messages":[` + u + `],"tools":[]}`},
		{"tool with strict and extra members (LiteLLM cache_control)", `{"model":"m","messages":[` + u + `],"tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":{}},"cache_control":{"type":"ephemeral"}}]}`},
		{"langchaingo nil Parameters", `{"model":"m","messages":[` + u + `],"tools":[{"type":"function","function":{"name":"f","parameters":null}}]}`},
		{"LangChain/LlamaIndex: assistant content null + tool_calls, then tool", `{"model":"m","messages":[` + u + `,` + call + `,` + res + `],"tools":[` + wt + `]}`},
		{"langchaingo: assistant content \"\" + tool_calls", `{"model":"m","messages":[` + u + `,` + strings.Replace(call, `"content":null`, `"content":""`, 1) + `,` + res + `]}`},
		{"messages with name", `{"model":"m","messages":[{"role":"system","content":"s","name":"sys"},{"role":"user","content":"hi","name":"alice"}]}`},
		{"user parts image_url/input_audio/file", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA","detail":"low"}},{"type":"input_audio","input_audio":{"data":"AA","format":"wav"}},{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,AA"}}]}]}`},
		{"assistant refusal part", `{"model":"m","messages":[` + u + `,{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]},` + u + `]}`},
		{"user empty string", `{"model":"m","messages":[{"role":"user","content":""}]}`},
		{"user empty array", `{"model":"m","messages":[{"role":"user","content":[]}]}`},
		{"tool_choice strings", `{"model":"m","messages":[` + u + `],"tools":[` + wt + `],"tool_choice":"required"}`},
		{"tool_choice function", `{"model":"m","messages":[` + u + `],"tools":[` + wt + `],"tool_choice":{"type":"function","function":{"name":"get_weather"}}}`},
		{"tool_choice allowed_tools", `{"model":"m","messages":[` + u + `],"tools":[` + wt + `],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"get_weather"}}]}}}`},
		{"custom tool (openai-go ChatCompletionCustomTool)", `{"model":"m","messages":[` + u + `],"tools":[{"custom":{"name":"grammar","format":{"type":"text"}},"type":"custom"}]}`},
		{"LiteLLM cache_control on a text part", `{"model":"m","messages":[{"role":"system","content":[{"type":"text","text":"long","cache_control":{"type":"ephemeral"}}]},` + u + `]}`},
		{"Ollama images member", `{"model":"m","messages":[{"role":"user","content":"what is this","images":["AAAA"]}]}`},
		{"DeepSeek reasoning_content on assistant", `{"model":"m","messages":[` + u + `,{"role":"assistant","content":"x","reasoning_content":"r"},` + u + `]}`},
		{"pretty-printed (Python json.dumps indent=2)", "{\n  \"model\": \"m\",\n  \"messages\": [\n    {\n      \"role\": \"user\",\n      \"content\": [\n        {\n          \"type\": \"text\",\n          \"text\": \"hi\"\n        }\n      ]\n    }\n  ],\n  \"tools\": [\n    {\n      \"type\": \"function\",\n      \"function\": {\n        \"name\": \"f\"\n      }\n    }\n  ]\n}"},
	} {
		if got := checkChatRequest([]byte(c.body)); got != "" {
			t.Errorf("%s: refused: %s\n  body %s", c.who, got, c.body)
		}
	}
}

// A tool whose type is present but not a string (null, a number) or an
// empty string is not "another kind of tool" admitted without a name:
// Go-decoding upstreams (Ollama) read type null / "" as a function tool,
// which would reach the model unnamed, with no tool policy seeing it.
func TestToolWithoutStringTypeNeedsName(t *testing.T) {
	for _, tool := range []string{
		`{"type":null,"function":{"description":"runs shell","parameters":{}}}`,
		`{"type":"","function":{"description":"runs shell","parameters":{}}}`,
		`{"type":7,"function":{"name":5}}`,
	} {
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[` + tool + `]}`
		if got := checkChatRequest([]byte(body)); got == "" {
			_, names := toolDecls([]byte(body))
			t.Errorf("admitted %s (tools_registered names %q)", tool, names)
		}
	}
}

// ---- 3. re-derived parts re-assemble to the original ----

func r82RandText(r *rand.Rand) string {
	alpha := []string{"a", "b", " ", "\"", "\\", "\n", "\t", "é", "✓", "😀", "\u2028", "</script>", "\u0001", "𝄞"}
	n := r.IntN(12)
	if r.IntN(5) == 0 {
		n = 0
	}
	var b strings.Builder
	for range n {
		b.WriteString(alpha[r.IntN(len(alpha))])
	}
	return b.String()
}

func r82JSONString(s string, esc bool) string {
	if !esc {
		b, _ := json.Marshal(s)
		return string(b)
	}
	// every non-ASCII rune as \u escapes (surrogate pairs for astral)
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c < 0x20 || c > 0x7e:
			if c > 0xffff {
				c -= 0x10000
				fmt.Fprintf(&b, "\\u%04x\\u%04x", 0xd800+(c>>10), 0xdc00+(c&0x3ff))
			} else {
				fmt.Fprintf(&b, "\\u%04x", c)
			}
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func r82RandPart(r *rand.Rand) string {
	esc := r.IntN(2) == 0
	switch r.IntN(6) {
	case 0, 1:
		return `{"type":"text","text":` + r82JSONString(r82RandText(r), esc) + `}`
	case 2:
		cl := []string{"", `,"closed":true`, `,"closed":false`}[r.IntN(3)]
		return `{"type":"thinking","thinking":[{"type":"text","text":` + r82JSONString(r82RandText(r), esc) + `}]` + cl + `}`
	case 3:
		return `{"type":"text","text":` + r82JSONString(r82RandText(r), esc) + `,"annotations":[]}`
	case 4:
		return `{"type":"image_url","image_url":{"url":"data:x"}}`
	default:
		return `{"type":"reference","reference_ids":[1,2]}`
	}
}

func r82Roundtrip(t *testing.T, parts string, piece int) (got, want string) {
	t.Helper()
	completion := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":` + parts + `},"finish_reason":"stop"}]}`
	var out bytes.Buffer
	if err := RederiveChatStream(&out, []byte(completion), RederiveOptions{MaxPieceBytes: piece}); err != nil {
		t.Fatalf("rederive %s: %v", parts, err)
	}
	s := NewChatStream(1 << 22)
	if _, err := s.ReadFrom(bytes.NewReader(out.Bytes())); err != nil {
		t.Fatal(err)
	}
	asm, err := s.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	return gjson.GetBytes(asm, "choices.0.message.content").Raw, parts
}

func r82Equal(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func TestReviewedRederivePartsProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(82, 1))
	fails := 0
	for i := range 3000 {
		n := 1 + r.IntN(5)
		ps := make([]string, n)
		for j := range ps {
			ps[j] = r82RandPart(r)
		}
		parts := "[" + strings.Join(ps, ",") + "]"
		piece := []int{1, 2, 3, 7, 4096}[i%5]
		got, want := r82Roundtrip(t, parts, piece)
		if !r82Equal(got, want) {
			if fails++; fails <= 5 {
				t.Errorf("piece %d:\n  original  %s\n  assembled %s", piece, want, got)
			}
		}
	}
	if fails > 0 {
		t.Errorf("%d of 3000 part arrays do not re-assemble to themselves", fails)
	}
}

// The minimal cases.
func TestReviewedRederiveAdjacentParts(t *testing.T) {
	for _, parts := range []string{
		`[{"type":"text","text":"a"},{"type":"text","text":"b"}]`,
		`[{"type":"thinking","thinking":[{"type":"text","text":"plan"}],"closed":true},{"type":"thinking","thinking":[{"type":"text","text":"more"}],"closed":true}]`,
		`[{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":""},{"type":"text","text":"b"}]`,
		`[{"type":"text","text":"a"},{"type":"text","text":""}]`,
	} {
		for _, piece := range []int{1, 4096} {
			if got, want := r82Roundtrip(t, parts, piece); !r82Equal(got, want) {
				t.Errorf("piece %d:\n  original  %s\n  assembled %s", piece, want, got)
			}
		}
	}
}

// Surrogate pairs and escapes at every piece size keep each chunk's piece
// decodable on its own (no U+FFFD from a split pair).
func TestReviewedPiecesDecodeAlone(t *testing.T) {
	text := `a\ud83d\ude00\"\\\n\u00e9😀\ud834\udd1eb`
	for piece := 1; piece <= 16; piece++ {
		parts := `[{"type":"text","text":"` + text + `"}]`
		completion := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":` + parts + `},"finish_reason":"stop"}]}`
		var out bytes.Buffer
		if err := RederiveChatStream(&out, []byte(completion), RederiveOptions{MaxPieceBytes: piece}); err != nil {
			t.Fatal(err)
		}
		var joined strings.Builder
		for _, d := range sseData(t, out.Bytes()) {
			if c := gjson.Get(d, "choices.0.delta.content"); c.IsArray() {
				s := c.Get("0.text").String()
				if strings.ContainsRune(s, '\uFFFD') {
					t.Errorf("piece %d: chunk text %q has U+FFFD", piece, s)
				}
				joined.WriteString(s)
			}
		}
		if want := gjson.Get(`"`+text+`"`, "@this").String(); joined.String() != want {
			t.Errorf("piece %d: joined %q want %q", piece, joined.String(), want)
		}
	}
}

// r82GzipUpstream answers gzip whenever the request's Accept-Encoding does
// not exclude it: an absent header accepts any coding (RFC 9110 §12.5.3).
func r82GzipUpstream(t *testing.T, seenAE *[]string, release chan struct{}) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ae := r.Header.Values("Accept-Encoding")
		*seenAE = append(*seenAE, strings.Join(ae, ","))
		w.Header().Set("Content-Type", "text/event-stream")
		if len(ae) == 0 || strings.Contains(strings.Join(ae, ","), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			_, _ = zw.Write([]byte("data: first\n\n"))
			_ = zw.Flush()
			w.(http.Flusher).Flush()
			if release != nil {
				<-release
			}
			_, _ = zw.Write([]byte("data: second\n\n"))
			_ = zw.Close()
			return
		}
		_, _ = w.Write([]byte("data: first\n\ndata: second\n\n"))
	}))
	t.Cleanup(up.Close)
	return up
}

func r82PTProxy(t *testing.T, up string) *httptest.Server {
	em, err := points.NewEmitter(points.Config{Bindings: []points.Binding{allowAll()}})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up)
	s := New(Options{Upstream: u, Emitter: em, Passthrough: []string{"/v1/fine_tuning*"}, UpstreamTimeout: 10 * time.Second})
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return hs
}

// A client that asks for gzip gets the upstream's gzip bytes with their
// Content-Encoding, and the first flushed event arrives before the rest.
func TestReviewedPassthroughGzipStreams(t *testing.T) {
	var seen []string
	release := make(chan struct{})
	up := r82GzipUpstream(t, &seen, release)
	hs := r82PTProxy(t, up.URL)
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get(hs.URL + "/v1/fine_tuning/jobs/x/events?stream=true") // Go client: Accept-Encoding gzip, decodes
		if err != nil {
			got <- "error " + err.Error()
			return
		}
		defer resp.Body.Close()
		if !resp.Uncompressed {
			got <- "not gzip-decoded by the client: Content-Encoding " + resp.Header.Get("Content-Encoding")
			return
		}
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		got <- line
	}()
	select {
	case l := <-got:
		if l != "data: first\n" {
			t.Fatalf("first line %q", l)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("first gzip-flushed event not relayed within 3s")
	}
	close(release)
	if len(seen) != 1 || seen[0] != "gzip" {
		t.Errorf("upstream saw Accept-Encoding %q", seen)
	}
}

// A client that sent no Accept-Encoding (curl without --compressed, many
// scripts) is asked identity for: none would let the upstream choose any
// coding, and the client would get gzip it never asked for.
func TestPassthroughWithoutAcceptEncodingStaysIdentity(t *testing.T) {
	var seen []string
	up := r82GzipUpstream(t, &seen, nil)
	hs := r82PTProxy(t, up.URL)
	tr := &http.Transport{DisableCompression: true} // sends no Accept-Encoding
	t.Cleanup(tr.CloseIdleConnections)
	req, _ := http.NewRequest("GET", hs.URL+"/v1/fine_tuning/jobs/x/events", nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ce := resp.Header.Get("Content-Encoding"); ce != "" || !strings.HasPrefix(string(b), "data: first") {
		t.Errorf("client sent no Accept-Encoding; upstream saw %q; answer Content-Encoding %q, body %q", seen, ce, b[:min(len(b), 16)])
	}
}
