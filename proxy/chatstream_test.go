package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/hooksproxy/hooksproxy/sse"
	openai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"gopkg.in/yaml.v3"
)

var csUpdate = flag.Bool("update-chatstream", false, "rewrite golden files under testdata/chatstream/golden")

const csTestLimit = 8 << 20

// csStreamCases are the valid streams: real recordings and constructed ones.
var csStreamCases = []struct {
	name string
	path string
}{
	{"openai-text", "testdata/openai-recorded/chat-streaming.yaml"},
	{"openai-usage-length", "testdata/openai-recorded/chat-streaming-detailed-usage.yaml"},
	{"openai-web-search", "testdata/openai-recorded/chat-streaming-web-search.yaml"},
	{"tool-call-dotnet", "testdata/chatstream/tool-call-dotnet.sse"},
	{"parallel-tools", "testdata/chatstream/parallel-tools.sse"},
	{"interleaved-tools", "testdata/chatstream/interleaved-tools.sse"},
	{"n2-choices", "testdata/chatstream/n2-choices.sse"},
	{"refusal", "testdata/chatstream/refusal.sse"},
	{"logprobs", "testdata/chatstream/logprobs.sse"},
	{"reasoning-annotations", "testdata/chatstream/reasoning-annotations.sse"},
	{"function-call-legacy", "testdata/chatstream/function-call-legacy.sse"},
	{"framing-escapes", "testdata/chatstream/framing-escapes.sse"},
	{"magistral-parts", "testdata/chatstream/magistral-parts.sse"},
}

// csLoadStream returns the raw SSE bytes of a fixture: a .sse file as is, or
// the response body of the first interaction of a go-vcr cassette.
func csLoadStream(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(path, ".yaml") {
		return b
	}
	var cassette struct {
		Interactions []struct {
			Response struct {
				Body string `yaml:"body"`
			} `yaml:"response"`
		} `yaml:"interactions"`
	}
	if err := yaml.Unmarshal(b, &cassette); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(cassette.Interactions) == 0 {
		t.Fatalf("%s: no interactions", path)
	}
	return []byte(cassette.Interactions[0].Response.Body)
}

// csChunkings deliver a stream in the ways the brief asks for.
var csChunkings = []struct {
	name string
	wrap func([]byte) io.Reader
}{
	{"whole", func(b []byte) io.Reader { return bytes.NewReader(b) }},
	{"one byte", func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) }},
	{"split at CR and LF", func(b []byte) io.Reader { return csSplitAt(b, "\r\n") }},
	{"CRLF", func(b []byte) io.Reader { return bytes.NewReader(bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n"))) }},
	{"CRLF split at CR", func(b []byte) io.Reader { return csSplitAt(bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")), "\r") }},
	{"CR only", func(b []byte) io.Reader { return bytes.NewReader(bytes.ReplaceAll(b, []byte("\n"), []byte("\r"))) }},
	{"random", func(b []byte) io.Reader { return csRandomChunks(b, uint64(len(b))) }},
}

type csChunkReader struct{ chunks [][]byte }

func (c *csChunkReader) Read(p []byte) (int, error) {
	for len(c.chunks) > 0 && len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	return n, nil
}

// csSplitAt delivers b in reads that end after every byte in cuts.
func csSplitAt(b []byte, cuts string) io.Reader {
	var chunks [][]byte
	last := 0
	for i, c := range b {
		if strings.IndexByte(cuts, c) >= 0 {
			chunks = append(chunks, b[last:i+1])
			last = i + 1
		}
	}
	return &csChunkReader{chunks: append(chunks, b[last:])}
}

func csRandomChunks(b []byte, seed uint64) io.Reader {
	rng := rand.New(rand.NewPCG(seed, 42))
	var chunks [][]byte
	for len(b) > 0 {
		n := 1 + rng.IntN(min(len(b), 300))
		chunks = append(chunks, b[:n])
		b = b[n:]
	}
	return &csChunkReader{chunks: chunks}
}

// assemble reads a whole stream and assembles it.
func csAssemble(t testing.TB, r io.Reader) ([]byte, *ChatStream) {
	t.Helper()
	s := NewChatStream(csTestLimit)
	if _, err := s.ReadFrom(r); err != nil {
		t.Fatalf("ReadFrom: %v", err)
	}
	out, err := s.Assemble()
	if err != nil {
		t.Fatalf("Assemble: %v", err)
	}
	// The proxy assembles into a buffer of this size: too small only
	// costs a regrowth, but it should not be.
	if h := s.AssembledSizeHint(); h < len(out) {
		t.Errorf("AssembledSizeHint %d < assembled length %d", h, len(out))
	}
	return out, s
}

func csGoldenPath(name string) string {
	return filepath.Join("testdata", "chatstream", "golden", name+".json")
}

func csCompactJSON(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("compact: %v", err)
	}
	return buf.Bytes()
}

// TestChatStreamAssemble checks every stream, at every chunking, against
// its golden completion; the output must already be compact JSON.
func TestChatStreamAssemble(t *testing.T) {
	t.Parallel()
	for _, sc := range csStreamCases {
		raw := csLoadStream(t, sc.path)
		if *csUpdate {
			out, _ := csAssemble(t, bytes.NewReader(raw))
			var buf bytes.Buffer
			if err := json.Indent(&buf, out, "", "  "); err != nil {
				t.Fatal(err)
			}
			buf.WriteByte('\n')
			if err := os.MkdirAll(filepath.Dir(csGoldenPath(sc.name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(csGoldenPath(sc.name), buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		golden, err := os.ReadFile(csGoldenPath(sc.name))
		if err != nil {
			t.Fatal(err)
		}
		want := csCompactJSON(t, golden)
		for _, ch := range csChunkings {
			t.Run(sc.name+"/"+ch.name, func(t *testing.T) {
				t.Parallel()
				got, _ := csAssemble(t, ch.wrap(raw))
				if !bytes.Equal(got, want) {
					t.Errorf("assembled:\n%s\nwant:\n%s", got, want)
				}
			})
		}
	}
}

// TestChatStreamAssembleFacts pins the facts the goldens must show, so a
// careless -update-chatstream cannot bless a wrong assembly.
func TestChatStreamAssembleFacts(t *testing.T) {
	t.Parallel()
	facts := map[string]map[string]string{
		"openai-text": {
			"id": "chatcmpl-C4HqHBe4xca0k0EzsCnf1t6V3YFXp", "model": "gpt-5-nano-2025-08-07", "created": "1755137933",
			"choices.0.message.content": "Hi there! How can I help today? I can answer questions, explain concepts, help with writing or brainstorming, code, plan something, and more. Tell me what you’d like to work on or a topic you’re curious about.",
			"choices.0.finish_reason":   "stop", "choices.0.message.refusal": "", "system_fingerprint": "", "service_tier": "default",
			"usage": "", "choices.#": "1",
		},
		"openai-usage-length": {
			"choices.0.finish_reason": "length", "choices.0.message.content": "", "usage.total_tokens": "112",
			"usage.completion_tokens_details.reasoning_tokens": "100",
		},
		"tool-call-dotnet": {
			"choices.0.message.tool_calls.0.id": "call_F9ZaqPWo69u0urxAhVt8meDW", "choices.0.message.tool_calls.0.type": "function",
			"choices.0.message.tool_calls.0.function.name":      "GetPersonAge",
			"choices.0.message.tool_calls.0.function.arguments": `{"personName":"Alice"}`,
			"choices.0.finish_reason":                           "tool_calls", "usage.total_tokens": "77", "system_fingerprint": "fp_f85bea6784",
			"choices.0.message.tool_calls.#": "1",
		},
		"parallel-tools": {
			"choices.0.message.tool_calls.#": "2", "choices.0.message.tool_calls.0.function.arguments": `{"city": "Paris, FR"}`,
			"choices.0.message.tool_calls.1.id": "call_b2", "choices.0.message.tool_calls.1.function.name": "get_time",
			"choices.0.message.tool_calls.1.function.arguments": `{"tz": "Europe/Paris"}`, "usage.total_tokens": "120",
		},
		"interleaved-tools": {
			"choices.0.message.tool_calls.0.id": "call_x", "choices.0.message.tool_calls.0.function.name": "search",
			"choices.0.message.tool_calls.0.function.arguments": `{"q":"a\"b"}`,
			"choices.0.message.tool_calls.1.id":                 "call_y", "choices.0.message.tool_calls.1.function.name": "lookup",
			"choices.0.message.tool_calls.1.function.arguments": `{"k":"c"}`,
		},
		"n2-choices": {
			"choices.#": "2", "choices.0.message.content": "Hello world!", "choices.0.finish_reason": "stop",
			"choices.1.index": "1", "choices.1.message.content": "Bonjour le", "choices.1.finish_reason": "length",
		},
		"refusal":  {"choices.0.message.refusal": "I'm sorry, I can't help with that.", "choices.0.message.content": ""},
		"logprobs": {"choices.0.logprobs.content.#": "3", "choices.0.logprobs.content.2.token": " sure", "choices.0.message.content": "Yes, sure"},
		"reasoning-annotations": {
			"choices.0.message.reasoning_content": "The user wants a citation.", "choices.0.message.annotations.#": "2",
			"choices.0.message.annotations.1.url_citation.url": "https://example.com/b", "choices.0.message.content": "See [1].",
		},
		"function-call-legacy": {
			"choices.0.message.function_call.name": "get_weather", "choices.0.message.function_call.arguments": `{"city":"Oslo"}`,
			"choices.0.finish_reason": "function_call",
		},
		"framing-escapes": {
			"id": "chatcmpl-T1", "model": "gpt-4o-mini-2024-07-18", "choices.0.message.content": "Line one\nLine \"two\" café 😀 日本 \t end",
		},
		"magistral-parts": {
			// Parts merge across chunks by kind; string deltas are text.
			"choices.0.message.content.#":                 "3",
			"choices.0.message.content.0.type":            "thinking",
			"choices.0.message.content.0.thinking.0.text": `The user asks for 2+2. "Four".`,
			"choices.0.message.content.0.closed":          "true",
			"choices.0.message.content.1":                 `{"type":"text","text":"2 + 2 is **4**. Café ✓"}`,
			"choices.0.message.content.2":                 `{"type":"reference","reference_ids":[1,2]}`,
			"choices.0.finish_reason":                     "stop",
			"usage.completion_tokens":                     "28",
		},
	}
	nulls := map[string][]string{
		"openai-text":      {"choices.0.message.refusal", "system_fingerprint"},
		"tool-call-dotnet": {"choices.0.message.content", "choices.0.message.refusal", "choices.0.logprobs"},
		"refusal":          {"choices.0.message.content"},
	}
	for _, sc := range csStreamCases {
		out, _ := csAssemble(t, bytes.NewReader(csLoadStream(t, sc.path)))
		if !gjson.ValidBytes(out) {
			t.Fatalf("%s: invalid JSON", sc.name)
		}
		if got := gjson.GetBytes(out, "object").String(); got != "chat.completion" {
			t.Errorf("%s: object = %q", sc.name, got)
		}
		for path, want := range facts[sc.name] {
			if got := gjson.GetBytes(out, path).String(); got != want {
				t.Errorf("%s: %s = %q, want %q", sc.name, path, got, want)
			}
		}
		for _, path := range nulls[sc.name] {
			if v := gjson.GetBytes(out, path); v.Type != gjson.Null || !v.Exists() {
				t.Errorf("%s: %s = %s, want null", sc.name, path, v.Raw)
			}
		}
		if gjson.GetBytes(out, "obfuscation").Exists() {
			t.Errorf("%s: obfuscation leaked into the completion", sc.name)
		}
	}
}

// csReadEvents parses a stream with the sse reader.
func csReadEvents(t testing.TB, r io.Reader) []sse.Event {
	t.Helper()
	rd := sse.NewReader(r, 0)
	var evs []sse.Event
	for {
		e, err := rd.Next()
		if err == io.EOF {
			return evs
		}
		if err != nil {
			t.Fatalf("reading events: %v", err)
		}
		evs = append(evs, e.Clone())
	}
}

func TestChatStreamWriteOriginal(t *testing.T) {
	t.Parallel()
	for _, sc := range csStreamCases {
		raw := csLoadStream(t, sc.path)
		want := csReadEvents(t, bytes.NewReader(raw))
		for i := range want {
			// A JSON payload over several data lines is replayed on one.
			var c bytes.Buffer
			if bytes.IndexByte(want[i].Data, '\n') >= 0 && json.Compact(&c, want[i].Data) == nil {
				want[i].Data = c.Bytes()
			}
		}
		for _, ch := range csChunkings {
			t.Run(sc.name+"/"+ch.name, func(t *testing.T) {
				t.Parallel()
				s := NewChatStream(csTestLimit)
				if _, err := s.ReadFrom(ch.wrap(raw)); err != nil {
					t.Fatal(err)
				}
				var out bytes.Buffer
				if err := s.WriteOriginal(&out); err != nil {
					t.Fatal(err)
				}
				if bytes.IndexByte(out.Bytes(), '\r') >= 0 {
					t.Fatal("replay contains CR")
				}
				got := csReadEvents(t, bytes.NewReader(out.Bytes()))
				if len(got) != len(want) {
					t.Fatalf("replayed %d events, want %d", len(got), len(want))
				}
				for i := range got {
					g, w := got[i], want[i]
					if g.Type != w.Type || !bytes.Equal(g.Data, w.Data) || g.ID != w.ID || g.HasID != w.HasID {
						t.Errorf("event %d = %q %q, want %q %q", i, g.Type, g.Data, w.Type, w.Data)
					}
				}
				// Replaying the replay is byte-identical: the framing is canonical.
				s2 := NewChatStream(csTestLimit)
				if _, err := s2.ReadFrom(bytes.NewReader(out.Bytes())); err != nil {
					t.Fatal(err)
				}
				var again bytes.Buffer
				if err := s2.WriteOriginal(&again); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(again.Bytes(), out.Bytes()) {
					t.Error("replay of the replay differs")
				}
			})
		}
	}
}

func TestChatStreamReplayOmitUsage(t *testing.T) {
	t.Parallel()
	_, s := csAssemble(t, bytes.NewReader(csLoadStream(t, "testdata/chatstream/tool-call-dotnet.sse")))
	var out bytes.Buffer
	if err := s.Replay(&out, ReplayOptions{OmitUsageChunk: true}); err != nil {
		t.Fatal(err)
	}
	evs := csReadEvents(t, &out)
	if len(evs) != s.Len()-1 {
		t.Fatalf("%d events, want %d", len(evs), s.Len()-1)
	}
	for _, e := range evs {
		if c := gjson.GetBytes(e.Data, "choices"); c.Exists() && len(c.Array()) == 0 {
			t.Errorf("usage chunk not omitted: %s", e.Data)
		}
	}
	if string(evs[len(evs)-1].Data) != "[DONE]" {
		t.Error("[DONE] lost")
	}
}

// rederive re-emits a completion and returns the stream.
func csRederive(t testing.TB, completion []byte, opts RederiveOptions) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := RederiveChatStream(&out, completion, opts); err != nil {
		t.Fatalf("RederiveChatStream: %v", err)
	}
	return out.Bytes()
}

// csCheckShape asserts the emit-side rules of docs/CLIENTS-AND-SSE.md
// (B3, B5 design consequences, C3, D1) on a re-derived stream.
func csCheckShape(t *testing.T, stream, completion []byte, opts RederiveOptions) {
	t.Helper()
	if bytes.IndexByte(stream, '\r') >= 0 {
		t.Fatal("CR in re-derived stream")
	}
	if !bytes.HasSuffix(stream, []byte("\n\ndata: [DONE]\n\n")) {
		t.Fatalf("stream does not end with a terminated [DONE]: %q", stream[max(0, len(stream)-40):])
	}
	// Line-based view, as langchaingo's scanner sees it.
	lines := strings.Split(strings.TrimSuffix(string(stream), "\n"), "\n")
	for i, l := range lines {
		if i%2 == 1 {
			if l != "" {
				t.Fatalf("line %d: want the blank line after a one-line event, got %q", i, l)
			}
			continue
		}
		if !strings.HasPrefix(l, "data: ") || len(l) >= 64<<10 {
			t.Fatalf("line %d is not one short data line: %.80q", i, l)
		}
	}
	evs := csReadEvents(t, bytes.NewReader(stream))
	sawRole := map[int64]bool{}
	for i, e := range evs[:len(evs)-1] {
		d := e.Data
		if !json.Valid(d) {
			t.Fatalf("event %d is not JSON: %s", i, d)
		}
		if gjson.GetBytes(d, "error").Exists() {
			t.Fatalf("event %d has a top-level error key", i)
		}
		for _, k := range []string{"id", "created", "model", "system_fingerprint", "service_tier"} {
			if got, want := gjson.GetBytes(d, k), gjson.GetBytes(completion, k); got.Raw != want.Raw {
				t.Errorf("event %d: %s = %s, want %s", i, k, got.Raw, want.Raw)
			}
		}
		if gjson.GetBytes(d, "object").String() != "chat.completion.chunk" {
			t.Errorf("event %d: wrong object", i)
		}
		choices := gjson.GetBytes(d, "choices").Array()
		if !opts.IncludeUsage && (len(choices) == 0 || gjson.GetBytes(d, "usage").Exists()) {
			t.Errorf("event %d: usage chunk or field without include_usage: %s", i, d)
		}
		if opts.IncludeUsage && len(choices) > 0 && gjson.GetBytes(d, "usage").Type != gjson.Null {
			t.Errorf("event %d: usage must be null on choice chunks", i)
		}
		for _, c := range choices {
			idx := c.Get("index").Int()
			delta := c.Get("delta")
			if !sawRole[idx] {
				if delta.Get("role").String() == "" {
					t.Errorf("event %d: first chunk of choice %d has no role", i, idx)
				}
				sawRole[idx] = true
			}
			for _, tc := range delta.Get("tool_calls").Array() {
				if !tc.Get("index").Exists() {
					t.Errorf("event %d: tool call delta without index", i)
				}
				// langchaingo appends a delta without type to the last call.
				if tc.Get("type").Exists() != tc.Get("id").Exists() || tc.Get("type").Exists() != tc.Get("function.name").Exists() {
					t.Errorf("event %d: id, type and name must come together in the first piece: %s", i, tc.Raw)
				}
				if !tc.Get("type").Exists() && tc.Get("function.arguments").String() == "" {
					t.Errorf("event %d: continuation piece without arguments: %s", i, tc.Raw)
				}
			}
		}
	}
}

// TestRederiveRoundTrip: Assemble(Rederive(Assemble(s))) == Assemble(s).
func TestRederiveRoundTrip(t *testing.T) {
	t.Parallel()
	for _, sc := range csStreamCases {
		completion, _ := csAssemble(t, bytes.NewReader(csLoadStream(t, sc.path)))
		for _, opts := range []RederiveOptions{{}, {IncludeUsage: true}, {MaxPieceBytes: 1}, {MaxPieceBytes: 7, IncludeUsage: true}} {
			t.Run(fmt.Sprintf("%s/%+v", sc.name, opts), func(t *testing.T) {
				t.Parallel()
				stream := csRederive(t, completion, opts)
				csCheckShape(t, stream, completion, opts)
				want := completion
				if !opts.IncludeUsage {
					var err error
					if want, err = sjson.DeleteBytes(completion, "usage"); err != nil {
						t.Fatal(err)
					}
				}
				for _, ch := range csChunkings[:2] {
					got, _ := csAssemble(t, ch.wrap(stream))
					if !bytes.Equal(got, want) {
						t.Errorf("%s: round trip:\n%s\nwant:\n%s", ch.name, got, want)
					}
				}
			})
		}
	}
}

// TestRederiveTransformed re-emits completions the lead may produce: one
// edited with sjson, and one pretty-printed with whitespace everywhere.
func TestRederiveTransformed(t *testing.T) {
	t.Parallel()
	completion, _ := csAssemble(t, bytes.NewReader(csLoadStream(t, "testdata/chatstream/tool-call-dotnet.sse")))
	edited, err := sjson.SetBytes(completion, "choices.0.message.tool_calls.0.function.arguments", "{\"personName\":\"[redacted]\"}\n")
	if err != nil {
		t.Fatal(err)
	}
	edited, err = sjson.SetBytes(edited, "choices.0.message.content", "Policy note:\n\"quoted\" </script> \u2028 ✓")
	if err != nil {
		t.Fatal(err)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, edited, "", "\t"); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string][]byte{"sjson": edited, "pretty": pretty.Bytes()} {
		t.Run(name, func(t *testing.T) {
			opts := RederiveOptions{IncludeUsage: true}
			stream := csRederive(t, c, opts)
			csCheckShape(t, stream, csCompactJSON(t, c), opts)
			got, _ := csAssemble(t, bytes.NewReader(stream))
			for _, p := range []string{"choices.0.message.content", "choices.0.message.tool_calls.0.function.arguments", "usage.total_tokens"} {
				if g, w := gjson.GetBytes(got, p).String(), gjson.GetBytes(c, p).String(); g != w {
					t.Errorf("%s = %q, want %q", p, g, w)
				}
			}
		})
	}
}

func TestRederiveInvalid(t *testing.T) {
	t.Parallel()
	for _, c := range []string{
		``, `[]`, `{"choices":{}}`, `{}`, `{"id":1,"choices":[]}`, `{"created":"x","choices":[]}`,
		`{"usage":5,"choices":[]}`, `{"choices":[5]}`, `{"choices":[{"index":-1}]}`, `{"choices":[{"index":0},{"index":0}]}`,
		`{"choices":[{"message":{"content":["part"]}}]}`, `{"choices":[{"message":{"tool_calls":{}}}]}`,
		`{"choices":[{"message":{"tool_calls":[{"type":"custom"}]}}]}`,
		`{"choices":[{"message":{"tool_calls":[{"function":{"arguments":{}}}]}}]}`,
		`{"choices":[{"finish_reason":1}]}`, `{"choices":[{"message":{"function_call":"x"}}]}`, `{"choices":[` + "\n",
		`{"choices":[{"message":{"content":"a","content":"b"}}]}`, `{"choices":[],"choices":[]}`,
		`{"choices":[{"message":{"tool_calls":[{"function":{"name":"a","name":"b"}}]}}]}`,
	} {
		var out bytes.Buffer
		err := RederiveChatStream(&out, []byte(c), RederiveOptions{})
		if !errors.Is(err, ErrInvalidCompletion) {
			t.Errorf("%s: err = %v, want ErrInvalidCompletion", c, err)
		}
		if out.Len() != 0 {
			t.Errorf("%s: wrote %q before failing", c, out.Bytes())
		}
	}
	// The minimal valid completion.
	stream := csRederive(t, []byte(`{"choices":[]}`), RederiveOptions{})
	if string(stream) != "data: [DONE]\n\n" {
		t.Errorf("empty choices: %q", stream)
	}
}

func TestEachPiece(t *testing.T) {
	t.Parallel()
	// Escaped JSON string contents with every kind of indivisible unit.
	s := `ab\"c\\d\u00e9\ud83d\ude00é日本😀\n\t\/x`
	for maxBytes := 1; maxBytes <= len(s)+1; maxBytes++ {
		var got []string
		err := eachPiece(s, maxBytes, func(p string) error { got = append(got, p); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, "") != s {
			t.Fatalf("max %d: pieces do not add up", maxBytes)
		}
		for _, p := range got {
			var dec string
			if err := json.Unmarshal([]byte(`"`+p+`"`), &dec); err != nil {
				t.Fatalf("max %d: piece %q is not a valid string: %v", maxBytes, p, err)
			}
			if strings.Contains(dec, "\uFFFD") {
				t.Fatalf("max %d: piece %q splits a character", maxBytes, p)
			}
			if len(p) > maxBytes && escapedTokenLen(p) != len(p) {
				t.Fatalf("max %d: piece %q too long", maxBytes, p)
			}
		}
	}
}

// TestAssembleSplitSurrogate documents a deliberate difference from
// clients that decode each chunk alone: a surrogate pair split across two
// deltas is joined, not turned into two U+FFFD.
func TestAssembleSplitSurrogate(t *testing.T) {
	t.Parallel()
	h := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"`
	stream := h + `\ud83d"}}]}` + "\n\n" + h + `\ude00"},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
	out, _ := csAssemble(t, strings.NewReader(stream))
	if got := gjson.GetBytes(out, "choices.0.message.content").String(); got != "😀" {
		t.Errorf("content = %q", got)
	}
}

// csErrorCases are streams the proxy must fail closed on.
var csErrorCases = []struct {
	file string
	want error
}{
	{"error-midstream.sse", ErrUpstreamStreamError},
	{"error-event.sse", ErrUpstreamStreamError},
	{"error-null-key.sse", ErrUpstreamStreamError},
	{"missing-done.sse", ErrMissingDone},
	{"truncated-chunk.sse", ErrMissingDone},
	{"empty.sse", ErrMissingDone},
	{"non-json.sse", ErrMalformedChunk},
	{"done-prefix.sse", ErrMalformedChunk},
	{"choices-not-array.sse", ErrMalformedChunk},
	{"duplicate-content-key.sse", ErrMalformedChunk},
	{"custom-tool-type.sse", ErrMalformedChunk},
	{"text-completion-object.sse", ErrMalformedChunk},
	{"content-not-string.sse", ErrMalformedChunk},
	{"huge-choice-index.sse", ErrMalformedChunk},
	{"only-done.sse", ErrMalformedChunk},  // from Assemble: no choice before [DONE]
	{"no-choices.sse", ErrMalformedChunk}, // idem, with chunks
}

func TestChatStreamErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range csErrorCases {
		raw := csLoadStream(t, filepath.Join("testdata", "chatstream", "errors", tc.file))
		for _, ch := range csChunkings {
			t.Run(tc.file+"/"+ch.name, func(t *testing.T) {
				t.Parallel()
				s := NewChatStream(csTestLimit)
				_, readErr := s.ReadFrom(ch.wrap(raw))
				_, err := s.Assemble()
				if !errors.Is(err, tc.want) {
					t.Fatalf("Assemble err = %v (ReadFrom: %v), want %v", err, readErr, tc.want)
				}
				if readErr != nil && readErr != err {
					t.Errorf("ReadFrom returned %v, Assemble %v: errors are not sticky", readErr, err)
				}
			})
		}
	}
}

func TestChatStreamUpstreamErrorDetails(t *testing.T) {
	t.Parallel()
	s := NewChatStream(csTestLimit)
	_, err := s.ReadFrom(bytes.NewReader(csLoadStream(t, "testdata/chatstream/errors/error-midstream.sse")))
	var ue *UpstreamStreamError
	if !errors.As(err, &ue) {
		t.Fatalf("err = %v", err)
	}
	if ue.Event != 2 || ue.Type != "server_error" || ue.Code != "internal_error" || ue.Message != "The server had an error" {
		t.Errorf("details = %+v", ue)
	}
	if strings.Contains(ue.Error(), "The server had an error") {
		t.Error("Error() carries the upstream message")
	}
	// The error event is kept, so the proxy can pass it on verbatim.
	var out bytes.Buffer
	if err := s.WriteOriginal(&out); err != nil {
		t.Fatal(err)
	}
	if evs := csReadEvents(t, &out); len(evs) != 3 || !gjson.GetBytes(evs[2].Data, "error").Exists() {
		t.Errorf("replay lost the error event: %d events", len(evs))
	}
	// An error key wins over anything else wrong with the chunk.
	_, err = NewChatStream(csTestLimit).ReadFrom(strings.NewReader(`data: {"id":5,"choices":{},"error":"boom"}` + "\n\n"))
	if !errors.As(err, &ue) || ue.Message != "boom" {
		t.Errorf("err = %v, want an UpstreamStreamError with message boom", err)
	}
	var ce *ChunkError
	_, err = NewChatStream(csTestLimit).ReadFrom(strings.NewReader("data: {\"choices\":5}\n\n"))
	if !errors.As(err, &ce) || ce.Event != 0 {
		t.Errorf("err = %v, want a ChunkError for event 0", err)
	}
}

func TestChatStreamStopsAtDone(t *testing.T) {
	t.Parallel()
	raw := csLoadStream(t, "testdata/chatstream/errors/event-after-done.sse")
	s := NewChatStream(csTestLimit)
	if _, err := s.ReadFrom(bytes.NewReader(raw)); err != nil {
		t.Fatalf("ReadFrom: %v", err)
	}
	if !s.Done() || s.Len() != 2 {
		t.Fatalf("Done=%v Len=%d", s.Done(), s.Len())
	}
	if _, err := s.Assemble(); err != nil {
		t.Fatal(err)
	}
	// Feeding an event after [DONE] by hand is an error.
	if err := s.Add(sse.Event{Data: []byte(`{"choices":[]}`)}); !errors.Is(err, ErrMalformedChunk) {
		t.Fatalf("Add after [DONE]: %v", err)
	}
}

func TestChatStreamBufferLimit(t *testing.T) {
	t.Parallel()
	raw := csLoadStream(t, "testdata/openai-recorded/chat-streaming.yaml")
	n := int64(len(raw))
	for _, tc := range []struct {
		limit int64
		ok    bool
	}{{n, true}, {n - 1, false}, {1000, false}, {0, false}, {-1, false}} {
		for _, ch := range csChunkings[:2] {
			s := NewChatStream(tc.limit)
			got, err := s.ReadFrom(ch.wrap(raw))
			if tc.ok != (err == nil) || (!tc.ok && !errors.Is(err, ErrBufferLimit)) {
				t.Errorf("limit %d (%s): err = %v", tc.limit, ch.name, err)
			}
			if tc.ok && got != n {
				t.Errorf("limit %d: consumed %d bytes, want %d", tc.limit, got, n)
			}
			if s.Size() > max(tc.limit, 0) {
				t.Errorf("limit %d: buffered %d", tc.limit, s.Size())
			}
		}
	}
	// One endless line is stopped by the reader's own limit.
	endless := io.MultiReader(strings.NewReader("data: "), csInfiniteReader{})
	s := NewChatStream(1 << 20)
	if _, err := s.ReadFrom(endless); !errors.Is(err, ErrBufferLimit) || !errors.Is(err, sse.ErrTooLarge) {
		t.Fatalf("endless line: %v", err)
	}
	// Add applies the limit to hand-built events too.
	s = NewChatStream(10)
	if err := s.Add(sse.Event{Data: []byte("0123456789A")}); !errors.Is(err, ErrBufferLimit) {
		t.Fatalf("Add over limit: %v", err)
	}
}

type csInfiniteReader struct{}

func (csInfiniteReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// TestChatStreamReset reuses one ChatStream, as a sync.Pool would.
func TestChatStreamReset(t *testing.T) {
	t.Parallel()
	s := NewChatStream(csTestLimit)
	for range 2 {
		for _, sc := range csStreamCases {
			raw := csLoadStream(t, sc.path)
			want, _ := csAssemble(t, bytes.NewReader(raw))
			s.Reset(csTestLimit)
			if _, err := s.ReadFrom(bytes.NewReader(raw)); err != nil {
				t.Fatalf("%s: %v", sc.name, err)
			}
			got, err := s.Assemble()
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s after Reset: %v\n%s\nwant\n%s", sc.name, err, got, want)
			}
		}
		s.Reset(csTestLimit)
		_, _ = s.ReadFrom(strings.NewReader("data: nope\n\n"))
	}
}

// csOpenAIGo runs openai-go's own SSE decoder and
// ChatCompletionAccumulator over a stream, as a Go client of the proxy would.
func csOpenAIGo(t *testing.T, stream []byte) openai.ChatCompletion {
	t.Helper()
	res := &http.Response{
		Header: http.Header{"Content-Type": []string{"text/event-stream; charset=utf-8"}},
		Body:   io.NopCloser(bytes.NewReader(stream)),
	}
	st := ssestream.NewStream[openai.ChatCompletionChunk](ssestream.NewDecoder(res), nil)
	acc := openai.ChatCompletionAccumulator{}
	n := 0
	for st.Next() {
		if !acc.AddChunk(st.Current()) {
			t.Fatalf("accumulator rejected chunk %d", n)
		}
		n++
	}
	if err := st.Err(); err != nil {
		t.Fatalf("openai-go stream error: %v", err)
	}
	if n == 0 {
		t.Fatal("openai-go saw no chunks")
	}
	return acc.ChatCompletion
}

type csClientView struct {
	ID, Model string
	Created   int64
	Usage     int64
	Choices   []string
}

func csViewOf(c openai.ChatCompletion) csClientView {
	v := csClientView{ID: c.ID, Model: c.Model, Created: c.Created, Usage: c.Usage.TotalTokens}
	for _, ch := range c.Choices {
		s := fmt.Sprintf("index=%d finish=%q role=%q content=%q refusal=%q", ch.Index, ch.FinishReason, ch.Message.Role, ch.Message.Content, ch.Message.Refusal)
		for _, tc := range ch.Message.ToolCalls {
			s += fmt.Sprintf(" tool{id=%q type=%q name=%q args=%q}", tc.ID, tc.Type, tc.Function.Name, tc.Function.Arguments)
		}
		v.Choices = append(v.Choices, s)
	}
	return v
}

// csStringClientsSkip are the streams whose content is parts, which
// openai-go and langchaingo, reading content as a string, cannot assemble.
var csStringClientsSkip = map[string]bool{"magistral-parts": true}

// TestOpenAIGoClientSeesSameCompletion: openai-go v3's accumulator gives
// the same result on the upstream stream, its replay and its re-derivation,
// and that result agrees with Assemble.
func TestOpenAIGoClientSeesSameCompletion(t *testing.T) {
	t.Parallel()
	for _, sc := range csStreamCases {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			raw := csLoadStream(t, sc.path)
			completion, s := csAssemble(t, bytes.NewReader(raw))
			var replay bytes.Buffer
			if err := s.WriteOriginal(&replay); err != nil {
				t.Fatal(err)
			}
			upstream := csViewOf(csOpenAIGo(t, raw))
			if csStringClientsSkip[sc.name] {
				// openai-go reads content as a string: it concatenates
				// the parts' JSON text, so only the replay reads alike.
				if got := csViewOf(csOpenAIGo(t, replay.Bytes())); fmt.Sprint(got) != fmt.Sprint(upstream) {
					t.Errorf("replay: openai-go sees\n%+v\nupstream gives\n%+v", got, upstream)
				}
				return
			}
			for name, stream := range map[string][]byte{
				"replay":   replay.Bytes(),
				"rederive": csRederive(t, completion, RederiveOptions{IncludeUsage: true}),
				"pieces":   csRederive(t, completion, RederiveOptions{IncludeUsage: true, MaxPieceBytes: 3}),
			} {
				got := csViewOf(csOpenAIGo(t, stream))
				if fmt.Sprint(got) != fmt.Sprint(upstream) {
					t.Errorf("%s: openai-go sees\n%+v\nupstream gives\n%+v", name, got, upstream)
				}
			}
			// And Assemble agrees with the client on what matters.
			for i, ch := range gjson.GetBytes(completion, "choices").Array() {
				want := upstream.Choices[i]
				if !strings.Contains(want, fmt.Sprintf("content=%q", ch.Get("message.content").String())) ||
					!strings.Contains(want, fmt.Sprintf("finish=%q", ch.Get("finish_reason").String())) {
					t.Errorf("choice %d: Assemble %s, client %s", i, ch.Raw, want)
				}
				for _, tc := range ch.Get("message.tool_calls").Array() {
					if !strings.Contains(want, fmt.Sprintf("args=%q", tc.Get("function.arguments").String())) {
						t.Errorf("choice %d: tool call %s not what the client sees", i, tc.Raw)
					}
				}
			}
			if got := gjson.GetBytes(completion, "usage.total_tokens").Int(); got != upstream.Usage {
				t.Errorf("usage %d, client %d", got, upstream.Usage)
			}
		})
	}
}

// csLangchainView emulates langchaingo v0.1.14 parseStreamingChatResponse
// (docs/CLIENTS-AND-SSE.md §B3): a line scanner with the default 64 KiB
// limit, JSON per "data: " line (others skipped), choices[0] only, and tool
// call deltas merged by type == "" onto the last call.
func csLangchainView(t *testing.T, stream []byte) (content string, calls [][3]string, finish string) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(stream))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		data := strings.TrimPrefix(line, "data: ")
		if data == "[DONE]" {
			break
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						ID       string `json:"id"`
						Type     string `json:"type"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			continue
		}
		if len(chunk.Choices) == 0 {
			continue
		}
		c := chunk.Choices[0]
		content += c.Delta.Content
		if c.FinishReason != "" {
			finish = c.FinishReason
		}
		for _, tc := range c.Delta.ToolCalls {
			if tc.Type == "" && tc.Function.Arguments != "" {
				if len(calls) > 0 {
					calls[len(calls)-1][2] += tc.Function.Arguments
				}
				continue
			}
			calls = append(calls, [3]string{tc.ID, tc.Function.Name, tc.Function.Arguments})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("langchaingo-style scanner: %v", err)
	}
	return content, calls, finish
}

// TestLangchaingoSeesCompletion: the least tolerant client reads the
// re-derived stream correctly, including parallel tool calls whose upstream
// fragments were interleaved (which it would garble if replayed as is).
func TestLangchaingoSeesCompletion(t *testing.T) {
	t.Parallel()
	for _, sc := range csStreamCases {
		if sc.name == "n2-choices" || csStringClientsSkip[sc.name] {
			continue // langchaingo reads choices[0] of every chunk only, and content as a string
		}
		completion, _ := csAssemble(t, bytes.NewReader(csLoadStream(t, sc.path)))
		for _, opts := range []RederiveOptions{{}, {IncludeUsage: true, MaxPieceBytes: 5}} {
			content, calls, finish := csLangchainView(t, csRederive(t, completion, opts))
			ch := gjson.GetBytes(completion, "choices.0")
			if content != ch.Get("message.content").String() || finish != ch.Get("finish_reason").String() {
				t.Errorf("%s: langchaingo content %q finish %q", sc.name, content, finish)
			}
			tcs := ch.Get("message.tool_calls").Array()
			if len(calls) != len(tcs) {
				t.Fatalf("%s: langchaingo sees %d tool calls, want %d", sc.name, len(calls), len(tcs))
			}
			for i, tc := range tcs {
				want := [3]string{tc.Get("id").String(), tc.Get("function.name").String(), tc.Get("function.arguments").String()}
				if calls[i] != want {
					t.Errorf("%s: tool call %d = %q, want %q", sc.name, i, calls[i], want)
				}
			}
		}
	}
}

// FuzzAssemble feeds arbitrary streams: no panic; a successful assembly is
// valid JSON, survives Rederive and re-assembly unchanged, and the replay
// assembles to the same completion.
func FuzzAssemble(f *testing.F) {
	for _, sc := range csStreamCases {
		f.Add(csLoadStream(f, sc.path))
	}
	for _, tc := range csErrorCases {
		f.Add(csLoadStream(f, filepath.Join("testdata", "chatstream", "errors", tc.file)))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		s := NewChatStream(1 << 20)
		_, readErr := s.ReadFrom(bytes.NewReader(in))
		var replay bytes.Buffer
		if err := s.WriteOriginal(&replay); err != nil {
			t.Fatalf("WriteOriginal: %v", err)
		}
		out, err := s.Assemble()
		if readErr != nil && err == nil {
			t.Fatalf("ReadFrom failed (%v) but Assemble succeeded", readErr)
		}
		// The template fast path must not change anything.
		slow := NewChatStream(1 << 20)
		slow.fullParse = true
		_, slowReadErr := slow.ReadFrom(bytes.NewReader(in))
		slowOut, slowErr := slow.Assemble()
		if (slowErr == nil) != (err == nil) || !bytes.Equal(slowOut, out) || (slowReadErr == nil) != (readErr == nil) || slow.Len() != s.Len() {
			t.Fatalf("fast path differs: %s (%v, %v) vs full parse %s (%v, %v)", out, err, readErr, slowOut, slowErr, slowReadErr)
		}
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON from Assemble: %s", out)
		}
		r2 := NewChatStream(2 << 20)
		if _, err := r2.ReadFrom(&replay); err != nil {
			t.Fatalf("replay does not read back: %v", err)
		}
		if again, err := r2.Assemble(); err != nil || !bytes.Equal(again, out) {
			t.Fatalf("replay assembles to %s (%v), want %s", again, err, out)
		}
		var re bytes.Buffer
		if err := RederiveChatStream(&re, out, RederiveOptions{IncludeUsage: true, MaxPieceBytes: 64}); err != nil {
			t.Fatalf("Rederive of an assembled completion: %v\n%s", err, out)
		}
		r3 := NewChatStream(8 << 20)
		if _, err := r3.ReadFrom(&re); err != nil {
			t.Fatalf("re-derived stream does not read back: %v", err)
		}
		if again, err := r3.Assemble(); err != nil || !bytes.Equal(again, out) {
			t.Fatalf("round trip gives %s (%v), want %s", again, err, out)
		}
	})
}

// FuzzRederive feeds arbitrary completions: no panic; an error writes
// nothing; otherwise every event is one line of compact JSON without a
// top-level error key, and the stream ends with [DONE].
func FuzzRederive(f *testing.F) {
	for _, sc := range csStreamCases {
		out, _ := csAssemble(f, bytes.NewReader(csLoadStream(f, sc.path)))
		f.Add(out, true, 3)
	}
	f.Add([]byte(`{"choices":[{"message":{"content":"a\ud83d\ude00b","x":[1,{"y":2}]},"finish_reason":"stop"}],"usage":{"a":1}}`), false, 1)
	f.Fuzz(func(t *testing.T, completion []byte, includeUsage bool, piece int) {
		var out bytes.Buffer
		err := RederiveChatStream(&out, completion, RederiveOptions{IncludeUsage: includeUsage, MaxPieceBytes: piece % 64})
		if err != nil {
			if !errors.Is(err, ErrInvalidCompletion) || out.Len() != 0 {
				t.Fatalf("err %v after writing %d bytes", err, out.Len())
			}
			return
		}
		evs := csReadEvents(t, bytes.NewReader(out.Bytes()))
		if len(evs) == 0 || string(evs[len(evs)-1].Data) != "[DONE]" {
			t.Fatal("stream does not end with [DONE]")
		}
		for _, e := range evs[:len(evs)-1] {
			if bytes.ContainsAny(e.Data, "\r\n") || !json.Valid(e.Data) || gjson.GetBytes(e.Data, "error").Exists() {
				t.Fatalf("bad event %q", e.Data)
			}
		}
	})
}

// csSyntheticStream builds an OpenAI-like text stream whose content has
// about size bytes, in 4-byte deltas like real tokens.
func csSyntheticStream(size int, tools bool) []byte {
	var b bytes.Buffer
	head := `{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1727895263,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_f85bea6784","choices":[{"index":0,"delta":`
	tail := `,"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"k0O"}`
	b.WriteString("data: " + head + `{"role":"assistant","content":"","refusal":null}` + tail + "\n\n")
	words := []string{"The ", "quick", " bro", "wn f", "ox \\\"", "jump", "s ov", "er ", "the ", "lazy", " dog", ".\\n"}
	for i, n := 0, 0; n < size; i++ {
		w := words[i%len(words)]
		n += len(w)
		b.WriteString("data: " + head + `{"content":"` + w + `"}` + tail + "\n\n")
	}
	finish := "stop"
	if tools {
		b.WriteString("data: " + head + `{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}` + tail + "\n\n")
		for range 20 {
			b.WriteString("data: " + head + `{"tool_calls":[{"index":0,"function":{"arguments":"{\"k\":1}"}}]}` + tail + "\n\n")
		}
		finish = "tool_calls"
	}
	b.WriteString("data: " + head + `{}` + strings.Replace(tail, `"finish_reason":null`, `"finish_reason":"`+finish+`"`, 1) + "\n\n")
	b.WriteString(`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1727895263,"model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":61,"completion_tokens":16,"total_tokens":77}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

var csBenchSizes = []struct {
	name string
	size int
}{{"1KB", 1 << 10}, {"32KB", 32 << 10}}

// BenchmarkAssemble measures ReadFrom plus Assemble with a reused
// ChatStream; bytes/s is over the upstream stream.
func BenchmarkAssemble(b *testing.B) {
	for _, bs := range csBenchSizes {
		b.Run(bs.name, func(b *testing.B) {
			stream := csSyntheticStream(bs.size, true)
			s := NewChatStream(csTestLimit)
			var out []byte
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			for b.Loop() {
				s.Reset(csTestLimit)
				if _, err := s.ReadFrom(bytes.NewReader(stream)); err != nil {
					b.Fatal(err)
				}
				var err error
				if out, err = s.AppendAssembled(out[:0]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(out)), "completion-bytes")
		})
	}
}

// BenchmarkRederive measures re-emitting an assembled completion.
func BenchmarkRederive(b *testing.B) {
	for _, bs := range csBenchSizes {
		b.Run(bs.name, func(b *testing.B) {
			completion, _ := csAssemble(b, bytes.NewReader(csSyntheticStream(bs.size, true)))
			b.SetBytes(int64(len(completion)))
			b.ReportAllocs()
			for b.Loop() {
				if err := RederiveChatStream(io.Discard, completion, RederiveOptions{IncludeUsage: true}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A stream whose chunks each carry their own id (LiteLLM for providers
// without one, older llama.cpp servers) and one whose tool call arguments
// come as an object (llama.cpp's server) are assembled, not refused: under
// the first id and with the arguments' JSON text, re-derived (Unjudged)
// so that every client reads one id and string arguments.
func TestChatStreamIrregularButAccepted(t *testing.T) {
	objArgs := []byte(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"search","arguments":{"query":"a \"b\""}}}]},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

`)
	for _, tc := range []struct {
		name string
		raw  []byte
		want map[string]string
	}{
		{"id changes", csLoadStream(t, filepath.Join("testdata", "chatstream", "id-changes.sse")), map[string]string{"id": "chatcmpl-E1", "choices.0.message.content": "x"}},
		{"object arguments", objArgs, map[string]string{"choices.0.message.tool_calls.0.function.arguments": `{"query":"a \"b\""}`}},
	} {
		for _, ch := range csChunkings {
			s := NewChatStream(csTestLimit)
			if _, err := s.ReadFrom(ch.wrap(tc.raw)); err != nil {
				t.Fatalf("%s/%s: ReadFrom: %v", tc.name, ch.name, err)
			}
			c, err := s.Assemble()
			if err != nil {
				t.Fatalf("%s/%s: Assemble: %v", tc.name, ch.name, err)
			}
			for path, want := range tc.want {
				if got := gjson.GetBytes(c, path).String(); got != want {
					t.Errorf("%s/%s: %s = %q, want %q", tc.name, ch.name, path, got, want)
				}
			}
			if !s.Unjudged() {
				t.Errorf("%s/%s: not re-derived", tc.name, ch.name)
			}
		}
	}
}
