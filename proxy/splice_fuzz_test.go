package proxy

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"testing"

	"github.com/tidwall/sjson"
)

// editMessages against one sjson write per edited message, over any
// body checkChatRequest admits (the only bodies writeInputs sees) and also
// over any valid JSON object (attach sees bodies the proxy rewrote).
func FuzzEditMessages(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}],"stream":true}`,
		`{ "messages" : [ {"role":"user","content":"a"} ,  {"role":"user","content":"b"} ] , "model":"m"}`,
		`{"messages":[]}`,
		`{"model":"m"}`,
		`{"model":"m","messag\u0065s":[{"role":"user","content":"a"}]}`,
		`{"model":"m","messages":[{"role":"user","cont\u0065nt":"a"}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"}]},{"role":"user"}]}`,
		`{"a":{"messages":[1]},"model":"m","messages":[{"role":"user","content":"a\"]}"}]}`,
		"{\"model\":\"m\",\"messages\":\n[\t{\"role\":\"user\",\"content\":\"a\"}\r\n]}",
	} {
		f.Add([]byte(s), uint16(0xffff), "edited")
		f.Add([]byte(s), uint16(5), `x"y\`)
	}
	f.Fuzz(func(t *testing.T, body []byte, mask uint16, v string) {
		if !json.Valid(body) {
			return
		}
		if b := bytes.TrimLeft(body, " \t\r\n"); len(b) == 0 || b[0] != '{' {
			return
		}
		admitted := checkChatRequest(body) == ""
		msgs := messagesOf(body)
		n := len(msgs)
		edited := func(i int) bool { return i < 16 && mask&(1<<i) != 0 }
		orig := append([]byte(nil), body...)
		want := append([]byte(nil), body...)
		wantErr := false
		for i := range n {
			if edited(i) {
				var err error
				if want, err = sjson.SetBytes(want, "messages."+strconv.Itoa(i)+".content", v+strconv.Itoa(i)); err != nil {
					wantErr = true
					break
				}
			}
		}
		got, err := editMessages(body, func(i int, m []byte) ([]byte, error) {
			if !edited(i) {
				return nil, nil
			}
			return sjson.SetBytes(m, "content", v+strconv.Itoa(i))
		})
		if !bytes.Equal(body, orig) {
			t.Fatalf("editMessages modified its input:\n%s\n%s", orig, body)
		}
		if err != nil || wantErr {
			if admitted && (err != nil) != wantErr {
				t.Fatalf("err %v, sjson err %v on %s", err, wantErr, body)
			}
			return
		}
		if !json.Valid(got) {
			t.Fatalf("invalid output %s from %s", got, body)
		}
		if bytes.Equal(got, want) {
			return
		}
		var g, w any
		_ = json.Unmarshal(got, &g)
		_ = json.Unmarshal(want, &w)
		if admitted || !reflect.DeepEqual(g, w) {
			t.Fatalf("admitted=%v\nbody %s\ngot  %s\nwant %s", admitted, body, got, want)
		}
	})
}
