package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// A json answer whose members the release keeps as sent but of a type the
// chat wire does not have is refused whole, as a stream with such a chunk
// is: the points would judge such a member as empty or as a default, the
// client would get it as sent.
func TestAnswerOfWrongShapeIsRefused(t *testing.T) {
	const msg = `"message":{"role":"assistant","content":"hi"}`
	for _, tc := range []struct{ name, answer string }{
		{"message string", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":"the secret","finish_reason":"stop"}]}`},
		{"message array", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":["the secret"],"finish_reason":"stop"}]}`},
		{"choice string", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":["the secret"]}`},
		{"finish_reason object", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,` + msg + `,"finish_reason":{"x":"the secret"}}]}`},
		{"object object", `{"id":"c","object":{"x":"the secret"},"created":1,"model":"m","choices":[{"index":0,` + msg + `,"finish_reason":"stop"}]}`},
		{"id array", `{"id":["the secret"],"object":"chat.completion","created":1,"model":"m","choices":[{"index":0,` + msg + `,"finish_reason":"stop"}]}`},
		{"created string", `{"id":"c","object":"chat.completion","created":"the secret","model":"m","choices":[{"index":0,` + msg + `,"finish_reason":"stop"}]}`},
		{"system_fingerprint object", `{"id":"c","object":"chat.completion","created":1,"model":"m","system_fingerprint":{"x":"the secret"},"choices":[{"index":0,` + msg + `,"finish_reason":"stop"}]}`},
		{"index object", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":{"x":"the secret"},` + msg + `,"finish_reason":"stop"}]}`},
		{"tool call string", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":["the secret"]},"finish_reason":"tool_calls"}]}`},
		{"tool call null", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"the secret","tool_calls":[null]},"finish_reason":"tool_calls"}]}`},
		{"tool name with NUL", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"shell\u0000exec the secret","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`},
		{"logprobs string", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,` + msg + `,"logprobs":"the secret","finish_reason":"stop"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, _ := upstream(t, tc.answer, false, 1<<20)
			p := newProxy(t, up.URL, allowAll())
			resp, body := post(t, p.URL, hello)
			if resp.StatusCode != 502 || gjson.GetBytes(body, "error.code").Str != "upstream_invalid_response" || strings.Contains(string(body), "secret") {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
		})
	}
	// The same tool name in a stream.
	sse := "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"shell\\u0000exec the secret\",\"arguments\":\"{}\"}}]},\"finish_reason\":null}]}\n\n" +
		"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"
	up, _ := upstream(t, sse, true, 1<<20)
	p := newProxy(t, up.URL, allowAll())
	if resp, body := post(t, p.URL, helloStream); resp.StatusCode != 502 || gjson.GetBytes(body, "error.code").Str != "upstream_invalid_response" || strings.Contains(string(body), "secret") {
		t.Fatalf("stream: %d %s", resp.StatusCode, body)
	}

	// The shapes the wire has pass: nulls where members may be null.
	for _, answer := range []string{
		`{"id":"c","object":"chat.completion","created":1,"model":"m","system_fingerprint":null,"service_tier":null,"choices":[{"index":0,` + msg + `,"logprobs":null,"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":null,"finish_reason":"stop"}]}`,
	} {
		up, _ := upstream(t, answer, false, 1<<20)
		p := newProxy(t, up.URL, allowAll())
		if resp, body := post(t, p.URL, hello); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", answer, resp.StatusCode, body)
		}
	}
}

// An upstream that switches protocols (101, the one 1xx the transport
// hands back, its body the raw connection) or answers a status HTTP does
// not have gets the client a 502 at once, not a bodiless 101 it would wait
// on: on the mediated route and on a passthrough path.
func TestUpstreamStatusWithoutAnAnswer(t *testing.T) {
	for _, status := range []string{"101 Switching Protocols", "999 Whatever"} {
		t.Run(status, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			// Every connection is closed and every goroutine gone when the
			// test ends (the stress tests count goroutines).
			var (
				wg    sync.WaitGroup
				mu    sync.Mutex
				conns []net.Conn
			)
			t.Cleanup(func() {
				ln.Close()
				mu.Lock()
				for _, c := range conns {
					c.Close()
				}
				mu.Unlock()
				wg.Wait()
			})
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					mu.Lock()
					conns = append(conns, c)
					mu.Unlock()
					wg.Add(1)
					go func() {
						defer wg.Done()
						defer c.Close()
						br := bufio.NewReader(c)
						for {
							req, err := http.ReadRequest(br)
							if err != nil {
								return
							}
							_, _ = io.Copy(io.Discard, req.Body)
							_, _ = io.WriteString(c, "HTTP/1.1 "+status+"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nContent-Length: 0\r\n\r\n")
							if strings.HasPrefix(status, "101") {
								// Hold the connection open, as an upgraded one is.
								_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
								_, _ = io.Copy(io.Discard, c)
								return
							}
						}
					}()
				}
			}()
			p := newProxy(t, "http://"+ln.Addr().String(), allowAll())
			codes := &upstreamCodes{}
			p.srv.opts.Metrics = codes
			client := &http.Client{Timeout: 5 * time.Second}
			req, _ := http.NewRequest("POST", p.URL+"/v1/chat/completions", strings.NewReader(hello))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 502 || gjson.GetBytes(body, "error.code").Str != "upstream_invalid_response" {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			codes.mu.Lock()
			defer codes.mu.Unlock()
			if len(codes.got) != 1 || codes.got[0] != 0 {
				t.Fatalf("counted under %v, want [0] (error)", codes.got)
			}
			// Passthrough carries no upgrade either.
			resp, err = client.Get(p.URL + "/v1/models")
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 502 || gjson.GetBytes(body, "error.code").Str != "upstream_invalid_response" {
				t.Fatalf("passthrough: %d %s", resp.StatusCode, body)
			}
		})
	}
}
