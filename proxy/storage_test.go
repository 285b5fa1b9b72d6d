package proxy

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/hooksproxy/hooksproxy/sse"
)

func TestSharedEnds(t *testing.T) {
	for _, tc := range []struct {
		a, b     string
		pre, suf int
	}{
		{"", "", 0, 0}, {"abc", "", 0, 0}, {"", "abc", 0, 0},
		{"abc", "abc", 3, 0}, {"abcdefghijXYZ", "abcdefghijQYZ", 10, 2},
		{"aXa", "aYYa", 1, 1}, {"aa", "aaa", 2, 0}, {"xa", "ya", 0, 1},
		{`{"id":"c","delta":{"content":"hello"}}`, `{"id":"c","delta":{"content":"world"}}`, 30, 3},
	} {
		pre, suf := sharedEnds([]byte(tc.a), []byte(tc.b))
		if pre != tc.pre || suf != tc.suf {
			t.Errorf("sharedEnds(%q, %q) = %d, %d; want %d, %d", tc.a, tc.b, pre, suf, tc.pre, tc.suf)
		}
	}
}

// naiveSharedEnds is sharedEnds byte by byte, the reference FuzzSharedEnds
// holds the word-wise loops to.
func naiveSharedEnds(a, b []byte) (pre, suf int) {
	n := min(len(a), len(b))
	for pre < n && a[pre] == b[pre] {
		pre++
	}
	for suf < n-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	return pre, suf
}

func FuzzSharedEnds(f *testing.F) {
	f.Add([]byte(`{"id":"c","delta":{"content":"hello"}}`), []byte(`{"id":"c","delta":{"content":"world"}}`))
	f.Add([]byte("abcdefghijklmnopqrstuvwxyz0123456789"), []byte("abcdefghijklmnopqrstuvwxyz0123456789"))
	f.Add([]byte("0123456789abcdefXYZ0123456789abcdef"), []byte("0123456789abcdefQQ0123456789abcdef"))
	f.Add([]byte("aaaaaaaaaaaaaaaaaaaa"), []byte("aaaaaaaaaa"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		pre, suf := sharedEnds(a, b)
		wp, ws := naiveSharedEnds(a, b)
		if pre != wp || suf != ws {
			t.Fatalf("sharedEnds(%q, %q) = %d, %d; want %d, %d", a, b, pre, suf, wp, ws)
		}
	})
}

// BenchmarkSharedEnds times one pair of successive content chunks shaped
// like OpenAI's (without obfuscation padding, so the shared tail is long),
// the comparison every stored stream event pays.
func BenchmarkSharedEnds(b *testing.B) {
	prev := []byte(`{"id":"chatcmpl-AxYz0123456789abcdefGHIJ","object":"chat.completion.chunk","created":1733000000,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_0123456789","choices":[{"index":0,"delta":{"content":" hello"},"logprobs":null,"finish_reason":null}],"usage":null}`)
	next := []byte(`{"id":"chatcmpl-AxYz0123456789abcdefGHIJ","object":"chat.completion.chunk","created":1733000000,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_0123456789","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}],"usage":null}`)
	for b.Loop() {
		sharedEnds(prev, next)
	}
}

// replayRoundTrip stores chunks built from pieces and checks that Replay
// gives back every event's data, type and id exactly.
func replayRoundTrip(t *testing.T, pieces [][]byte) {
	t.Helper()
	cs := NewChatStream(1 << 30)
	var want []sse.Event
	for i, p := range pieces {
		content, _ := json.Marshal(string(p))
		ev := sse.Event{Data: []byte(`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":` + string(content) + `}}]}`)}
		if i%3 == 1 {
			ev.ID, ev.HasID = "e"+strconv.Itoa(i), true
		}
		if err := cs.Add(ev); err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
		want = append(want, ev)
	}
	if err := cs.Add(sse.Event{Data: []byte("[DONE]")}); err != nil {
		t.Fatal(err)
	}
	want = append(want, sse.Event{Data: []byte("[DONE]")})
	var out bytes.Buffer
	if err := cs.WriteOriginal(&out); err != nil {
		t.Fatal(err)
	}
	rd := sse.NewReader(&out, 0)
	for i, w := range want {
		got, err := rd.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if !bytes.Equal(got.Data, w.Data) || got.ID != w.ID || got.HasID != w.HasID {
			t.Fatalf("event %d: got %q id %q, want %q id %q", i, got.Data, got.ID, w.Data, w.ID)
		}
	}
}

func TestReplayRoundTrip(t *testing.T) {
	replayRoundTrip(t, [][]byte{[]byte("hello"), []byte("hello"), []byte(""), []byte("hel"), []byte("lo world"), []byte(`"}]}`), []byte("x")})
}

func FuzzReplayRoundTrip(f *testing.F) {
	f.Add([]byte("one two three four"), byte(3))
	f.Add([]byte(`a"}]}b"}]}`), byte(1))
	f.Fuzz(func(t *testing.T, b []byte, n byte) {
		step := int(n%16) + 1
		var pieces [][]byte
		for i := 0; i < len(b); i += step {
			pieces = append(pieces, b[i:min(i+step, len(b))])
		}
		replayRoundTrip(t, pieces)
	})
}

// TestTemplateMatchesFullParse streams chunks that differ only inside the
// content string, with bodies that are and are not plain, and requires the
// fast path to assemble (or fail) exactly as the full parse does.
func TestTemplateMatchesFullParse(t *testing.T) {
	bodies := []string{`Hello`, ` world`, `\"quoted\"`, `\\`, `caf\u00e9`, `\ud83d\ude00`, "é", `\ud800`, "\xff", `a"b`, `x\`, `\q`, `\u12`, "\x01", ``, `\/\b\f\n\r\t`}
	for i := range bodies {
		for j := range bodies {
			var in bytes.Buffer
			for _, b := range []string{bodies[i], bodies[j], bodies[i]} {
				in.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + b + `"},"finish_reason":null}]}` + "\n\n")
			}
			in.WriteString("data: [DONE]\n\n")
			fast, slow := NewChatStream(1<<20), NewChatStream(1<<20)
			slow.fullParse = true
			_, ferr := fast.ReadFrom(bytes.NewReader(in.Bytes()))
			_, serr := slow.ReadFrom(bytes.NewReader(in.Bytes()))
			fo, foErr := fast.Assemble()
			so, soErr := slow.Assemble()
			if (ferr == nil) != (serr == nil) || (foErr == nil) != (soErr == nil) || !bytes.Equal(fo, so) {
				t.Errorf("bodies %q, %q: fast %s (%v/%v), full %s (%v/%v)", bodies[i], bodies[j], fo, ferr, foErr, so, serr, soErr)
			}
		}
	}
}

// BenchmarkReplay is the release of a held stream one for one: every event
// rebuilt from the stored differences and written as SSE.
func BenchmarkReplay(b *testing.B) {
	for _, bs := range csBenchSizes {
		b.Run(bs.name, func(b *testing.B) {
			stream := csSyntheticStream(bs.size, true)
			s := NewChatStream(csTestLimit)
			if _, err := s.ReadFrom(bytes.NewReader(stream)); err != nil {
				b.Fatal(err)
			}
			var out bytes.Buffer
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			for b.Loop() {
				out.Reset()
				if err := s.WriteOriginal(&out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
