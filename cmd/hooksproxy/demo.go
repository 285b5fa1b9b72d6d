package main

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hooksproxy/hooksproxy/scripted"
)

//go:embed demo.yaml
var demoConfig string

// demoUpstream scripts the answers the demo's curl commands provoke.
func demoUpstream() *scripted.Server {
	return scripted.New(
		scripted.Rule{When: "weather", AfterTool: true, Reply: scripted.Text("It is sunny and 21°C in Paris.")},
		scripted.Rule{When: "", AfterTool: true, Reply: scripted.Text("Done.")},
		scripted.Rule{When: "weather", Reply: scripted.Calls(scripted.ToolCall{ID: "call_weather_1", Name: "get_weather", Arguments: `{"city":"Paris"}`})},
		scripted.Rule{When: "key", Reply: scripted.Text("Sure. The deploy key is sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123456789 and it expires Friday.")},
		scripted.Rule{When: "plan", Reply: scripted.Text("The secret plan is to launch on Monday.")},
		scripted.Rule{When: "email", Reply: scripted.Calls(scripted.ToolCall{ID: "call_email_1", Name: "send_email", Arguments: `{"to":"cfo@example.com","subject":"Q3 numbers"}`})},
		scripted.Rule{When: "delete", Reply: scripted.Calls(scripted.ToolCall{ID: "call_rm_1", Name: "delete_files", Arguments: `{"path":"/"}`})},
		scripted.Rule{When: "", Reply: scripted.Text("Hello! I am a scripted model behind hooksproxy.")},
	)
}

func demo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs, "Runs the proxy in front of an embedded scripted model with example policies: no API\nkey and no config file. It prints requests to try.")
	var c commonFlags
	// No --config: the demo's policies are its own (demo.yaml). It logs
	// at warn unless told otherwise, so its printed guide stays readable.
	c.registerLog(fs, "warn")
	c.registerListen(fs, "127.0.0.1:8080", "address the demo proxy listens on")
	for _, a := range args {
		if a == "--" {
			break
		}
		if n := strings.TrimLeft(a, "-"); n != a && (n == "config" || strings.HasPrefix(n, "config=")) {
			// HOOKSPROXY_CONFIG in the environment is left for serve.
			fmt.Fprintln(stderr, "hooksproxy demo: --config is not used by the demo, which runs its own policies; run `hooksproxy serve --config FILE` for yours")
			return 2
		}
	}
	if code, stop := parseFlags(fs, args); stop {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "hooksproxy demo: unexpected argument %q (the demo takes only flags)\n", fs.Arg(0))
		return 2
	}
	log, err := c.logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "hooksproxy:", err)
		return 2
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(stderr, "hooksproxy demo:", err)
		return 1
	}
	up := &http.Server{Handler: demoUpstream()}
	go func() { _ = up.Serve(ln) }()
	defer up.Close()

	dir, err := os.MkdirTemp("", "hooksproxy-demo-")
	if err != nil {
		fmt.Fprintln(stderr, "hooksproxy demo:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "hooksproxy.yaml")
	cfg := strings.ReplaceAll(demoConfig, "UPSTREAM_URL", "http://"+ln.Addr().String())
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		fmt.Fprintln(stderr, "hooksproxy demo:", err)
		return 1
	}
	// The demo's admin API (records, approvals) takes the token "demo"
	// unless one is set.
	if os.Getenv("HOOKSPROXY_ADMIN_TOKEN") == "" {
		_ = os.Setenv("HOOKSPROXY_ADMIN_TOKEN", "demo")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rt, err := startRuntime(ctx, path, c.listen, log, nil)
	if err != nil {
		fmt.Fprintln(stderr, "hooksproxy demo:", err)
		return 1
	}
	if strings.EqualFold(c.logFormat, "json") {
		announce(stdout, stderr, log, true, false, rt.addr) // the JSON log stream gets its line too, at any level
	}
	printDemo(stdout, rt.addr, ln.Addr().String())
	rt.stopSignals, rt.forceSignals = stop, notifyForce // a second signal ends the demo at once
	return rt.wait(ctx)
}

func printDemo(w io.Writer, addr, upstream string) {
	base := "http://" + addr
	chat := func(msg string) string {
		return fmt.Sprintf(`curl -s %s/v1/chat/completions -H 'Content-Type: application/json' -d '{"model":"demo","messages":[{"role":"user","content":"%s"}]}'`, base, msg)
	}
	fmt.Fprintf(w, `hooksproxy demo: proxy on %[1]s, scripted upstream on http://%[2]s (no API key needed)
Policies: the example set in cmd/hooksproxy/demo.yaml.

1. Allow: a plain answer passes every point.
   %[3]s

2. Redaction: the model leaks an API key; hooksproxy.content masks it in place.
   %[4]s

3. Deny: the final answer mentions a secret; the output policy answers 403.
   %[5]s

4. Escalation: the model asks to send an email; hooksproxy.tools escalates
   (a liftable deny: "liftable": true; with an approval resolver configured the
   request would wait for a person instead).
   %[6]s

5. Streaming works the same way: held until the verdict, then released.
   %[7]s

6. The payload-free audit records of every decision, and the metrics:
   curl -s %[1]s/agent-hooks/v1/records -H 'Authorization: Bearer '"${HOOKSPROXY_ADMIN_TOKEN:-demo}"
   curl -s %[1]s/metrics | grep hooksproxy_decisions_total

Point any OpenAI client at it:
   export OPENAI_BASE_URL=%[1]s/v1 OPENAI_API_KEY=demo

Press Ctrl-C to stop.
`, base, upstream, chat("hello"), chat("what is the deploy key?"), chat("tell me the plan"), chat("email the CFO the Q3 numbers"),
		fmt.Sprintf(`curl -sN %s/v1/chat/completions -H 'Content-Type: application/json' -d '{"model":"demo","stream":true,"messages":[{"role":"user","content":"what is the deploy key?"}]}'`, base))
}
