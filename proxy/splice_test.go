package proxy

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// editMessages gives what one sjson write per edited message gives, for
// bodies with whitespace, other members around messages and edits
// anywhere.
func TestEditMessagesMatchesSjson(t *testing.T) {
	bodies := []string{
		`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}],"stream":true}`,
		`{ "messages" : [ {"role":"user","content":"a"} ,  {"role":"user","content":"b"} ] , "model":"m"}`,
		`{"messages":[]}`,
		`{"model":"m"}`,
	}
	for bi, body := range bodies {
		n := int(gjson.Get(body, "messages.#").Int())
		for mask := 0; mask < 1<<n; mask++ {
			t.Run(fmt.Sprintf("%d/%b", bi, mask), func(t *testing.T) {
				want := []byte(body)
				for i := range n {
					if mask&(1<<i) != 0 {
						want, _ = sjson.SetBytes(want, "messages."+strconv.Itoa(i)+".content", "edited "+strconv.Itoa(i))
					}
				}
				got, err := editMessages([]byte(body), func(i int, m []byte) ([]byte, error) {
					if mask&(1<<i) == 0 {
						return nil, nil
					}
					return sjson.SetBytes(m, "content", "edited "+strconv.Itoa(i))
				})
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != string(want) {
					t.Fatalf("got  %s\nwant %s", got, want)
				}
			})
		}
	}
}

// BenchmarkInputReplayHistory is a request whose ~1 MB history of 200
// messages holds 50 that an input verdict of the session masked: linear in
// the body (one rebuild), not 50 copies of it.
func BenchmarkInputReplayHistory(b *testing.B) {
	up, _ := seqUpstream(&testing.T{}, plainCompletion)
	defer up.Close()
	p := newProxy(b, up.URL, maskInput("[masked]"), allowAll())
	filler := strings.Repeat("x", 5000)
	hdr := []string{"X-Agent-Hooks-Session", "bench"}
	if resp, _ := post(b, p.URL, `{"model":"m","messages":[{"role":"user","content":"my card SECRET123"}]}`, hdr...); resp.StatusCode != 200 {
		b.Fatal(resp.StatusCode)
	}
	var msgs []string
	for i := range 200 {
		switch {
		case i%4 == 0:
			msgs = append(msgs, `{"role":"user","content":"my card SECRET123"}`)
		case i%2 == 1:
			msgs = append(msgs, `{"role":"assistant","content":"`+filler+`"}`)
		default:
			msgs = append(msgs, `{"role":"user","content":"`+filler+`"}`)
		}
	}
	body := `{"model":"m","messages":[` + strings.Join(msgs, ",") + `,{"role":"user","content":"next"}]}`
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if resp, _ := post(b, p.URL, body, hdr...); resp.StatusCode != 200 {
			b.Fatal(resp.StatusCode)
		}
	}
}
