// Command upstream serves the examples' scripted model on loopback, so each
// examples/*.yaml can be tried without an API key:
//
//	go run ./examples/cmd/upstream                 # 127.0.0.1:9099
//	go run ./cmd/hooksproxy serve --config examples/egress-guard.yaml
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/hooksproxy/hooksproxy/examples/upstream"
)

func main() {
	addr := flag.String("listen", upstream.Addr, "loopback address to listen on")
	flag.Parse()
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		log.Fatalf("upstream: --listen: %v", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		// A scripted model has no business on a public interface.
		log.Fatalf("upstream: --listen must be a loopback address, not %s", host)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("upstream: %v", err)
	}
	fmt.Fprintf(os.Stderr, "scripted upstream on http://%s (Ctrl-C to stop)\n", ln.Addr())
	srv := &http.Server{Handler: upstream.New(), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.Serve(ln))
}
