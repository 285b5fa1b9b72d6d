package proxy

import (
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hooksproxy/hooksproxy/points"
)

// A stream whose content comes as parts (Mistral's Magistral: thinking
// parts, then text) is judged as the parts it assembles to, thinking text
// included, and released only when the verdicts pass.
func TestContentPartsStreamIsJudged(t *testing.T) {
	raw, err := os.ReadFile("testdata/chatstream/magistral-parts.sse")
	if err != nil {
		t.Fatal(err)
	}
	stream := string(raw)
	var mu sync.Mutex
	var seen []string
	judge := func(deny bool) points.Binding {
		return at(points.PostModelCall, "parts", func(c *points.Context) (points.Verdict, error) {
			content := gjson.GetBytes(c.Raw(), "response.content")
			mu.Lock()
			seen = append(seen, content.Raw)
			mu.Unlock()
			if deny && strings.Contains(content.Raw, "Four") {
				return points.Deny("thinking_leak", "the thinking names the answer"), nil
			}
			return points.Allow(), nil
		})
	}

	t.Run("allowed", func(t *testing.T) {
		up, _ := upstream(t, stream, true, 17)
		p := newProxy(t, up.URL, allowAll(), judge(false))
		resp, body := post(t, p.URL, helloStream)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d %s", resp.StatusCode, body)
		}
		if string(body) != stream {
			t.Errorf("the stream was not released as it came:\n%s", body)
		}
		mu.Lock()
		got := seen[len(seen)-1]
		mu.Unlock()
		c := gjson.Parse(got)
		if !c.IsArray() || c.Get("#").Int() != 3 || c.Get("0.thinking.0.text").Str != `The user asks for 2+2. "Four".` ||
			c.Get("1.text").Str != "2 + 2 is **4**. Café ✓" {
			t.Errorf("post_model_call judged content %s", got)
		}
		if pts := points_(p.sink); !strings.Contains(strings.Join(pts, ","), "post_model_call") {
			t.Errorf("records %v", pts)
		}
	})

	t.Run("denied", func(t *testing.T) {
		up, _ := upstream(t, stream, true, 17)
		p := newProxy(t, up.URL, allowAll(), judge(true))
		resp, body := post(t, p.URL, helloStream)
		if resp.StatusCode == 200 && !strings.Contains(string(body), "thinking_leak") || strings.Contains(string(body), "Four") || strings.Contains(string(body), "**4**") {
			t.Fatalf("status %d body %s", resp.StatusCode, body)
		}
		denied := false
		for _, r := range p.sink.Records() {
			if r.InterceptionPoint == points.PostModelCall {
				denied = r.Verdict.Decision == points.DecisionDeny && r.Verdict.Reason == "thinking_leak"
			}
		}
		if !denied {
			t.Fatalf("no post_model_call deny among %v", points_(p.sink))
		}
	})

	t.Run("re-derived", func(t *testing.T) {
		// A member no point judges makes the stream re-derived: the parts
		// go out in one chunk, and a client that merges parts reads
		// what was judged.
		withExtra := strings.Replace(stream, `"content":" is **4**"`, `"content":" is **4**","audio_token":7`, 1)
		up, _ := upstream(t, withExtra, true, 1<<20)
		p := newProxy(t, up.URL, allowAll(), judge(false))
		resp, body := post(t, p.URL, helloStream)
		if resp.StatusCode != 200 || strings.Contains(string(body), "audio_token") {
			t.Fatalf("status %d body %s", resp.StatusCode, body)
		}
		var parts []gjson.Result
		for _, d := range sseData(t, body) {
			if c := gjson.Get(d, "choices.0.delta.content"); c.IsArray() {
				parts = append(parts, c.Array()...)
			}
		}
		if len(parts) != 3 || parts[0].Get("closed").Raw != "true" || parts[1].Get("text").Str != "2 + 2 is **4**. Café ✓" || parts[2].Get("type").Str != "reference" {
			t.Errorf("released parts %v", parts)
		}
	})
}

// A long thinking part is re-derived in pieces, no SSE line near the 64 KiB
// a line scanner takes, and assembles back to the part it was.
func TestRederivedPartsStayShortLines(t *testing.T) {
	long := strings.Repeat("Weighing the options \"carefully\"; ", 6000) // ~200 KB
	completion := `{"id":"c","object":"chat.completion","created":1,"model":"magistral","choices":[{"index":0,"message":{"role":"assistant","content":[` +
		`{"type":"thinking","thinking":[{"type":"text","text":` + string(appendString(nil, long)) + `}],"closed":true},` +
		`{"type":"text","text":"Done."},{"type":"reference","reference_ids":[3]}]},"finish_reason":"stop"}]}`
	var out strings.Builder
	if err := RederiveChatStream(&out, []byte(completion), RederiveOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if len(line) > 32<<10 {
			t.Fatalf("a %d-byte SSE line", len(line))
		}
	}
	s := NewChatStream(1 << 22)
	if _, err := s.ReadFrom(strings.NewReader(out.String())); err != nil {
		t.Fatal(err)
	}
	got, err := s.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	want := gjson.Get(completion, "choices.0.message.content").Raw
	if g := gjson.GetBytes(got, "choices.0.message.content").Raw; g != want {
		t.Errorf("assembled %.300s\nwant %.300s", g, want)
	}
}
