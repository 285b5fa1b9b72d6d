package e2e

// The real hooksproxy binary, built once from this tree, in front of the
// r2 scripted upstream, its records file read back: what only the command
// wires (the console resolver) is driven by real clients here.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// hooksproxyBinary builds cmd/hooksproxy once per test binary into a
// directory the process removes on exit (see TestMain).
func hooksproxyBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hooksproxy-e2e-")
		if err != nil {
			binErr = err
			return
		}
		binDir = dir
		binPath = filepath.Join(dir, "hooksproxy")
		// Built in the main module (its go.sum, not this module's).
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/hooksproxy")
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// binDir is removed when the tests end.
var binDir string

func TestMain(m *testing.M) {
	// The review configs read their admin token from the environment; set
	// once here rather than per test (t.Setenv), so that tests that only
	// wait (in-flight holds) can run in parallel.
	if err := os.Setenv("R2_ADMIN_TOKEN", r2Token); err != nil {
		panic(err)
	}
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

type binProxy struct {
	URL     string
	Up      *r2up
	records string
	cmd     *exec.Cmd
	logs    *strings.Builder
}

// binRec is a record as the records file holds it.
type binRec = r2rec

// startBinary runs the binary with yaml (UPSTREAM_URL replaced, listen and
// records.file added) and waits for /readyz.
func startBinary(t *testing.T, yaml string, up *r2up) *binProxy {
	t.Helper()
	return startBinaryWith(t, yaml, up, up)
}

// startBinaryWith serves h as the upstream (up is what Up reports).
func startBinaryWith(t *testing.T, yaml string, h http.Handler, up *r2up) *binProxy {
	t.Helper()
	bin := hooksproxyBinary(t)
	upSrv := httptest.NewServer(h)
	t.Cleanup(upSrv.Close)
	dir := t.TempDir()
	port := freePort(t)
	b := &binProxy{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Up: up, records: filepath.Join(dir, "records.jsonl"), logs: &strings.Builder{}}
	y := strings.ReplaceAll(yaml, "UPSTREAM_URL", upSrv.URL)
	y = fmt.Sprintf("listen: 127.0.0.1:%d\nrecords: {file: %s}\n", port, b.records) + y
	cfgPath := filepath.Join(dir, "hooksproxy.yaml")
	if err := os.WriteFile(cfgPath, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	b.cmd = exec.Command(bin, "serve", "--config", cfgPath)
	b.cmd.Env = append(os.Environ(), "R2_ADMIN_TOKEN="+r2Token)
	b.cmd.Stdout = b.logs
	b.cmd.Stderr = b.logs
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = b.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = b.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = b.cmd.Process.Kill()
			<-done
		}
		// Every session's records, in file order, are gapless and in
		// sequence; each lifecycle ends with agent_shutdown.
		by := map[string][]binRec{}
		for _, r := range b.fileRecs(t, "", 0) {
			by[r.Session] = append(by[r.Session], r)
		}
		for sid, rs := range by {
			if !r2seqOK(rs) {
				t.Errorf("records file: session %s out of order: %v", sid, r2points(rs))
			}
			if rs[len(rs)-1].Point != "agent_shutdown" {
				t.Errorf("records file: session %s ends without agent_shutdown: %v", sid, r2points(rs))
			}
		}
		if t.Failed() {
			t.Logf("proxy log:\n%s", b.logs.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(b.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxy not ready: %v\n%s", err, b.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return b
}

// env returns an r2env view so the r2 client helpers work against the binary.
func (b *binProxy) env() *r2env { return &r2env{URL: b.URL, Up: b.Up} }

// fileRecs reads the records file (all sessions, file order), waiting up
// to wait for it to stop growing.
func (b *binProxy) fileRecs(t *testing.T, sid string, wait time.Duration) []binRec {
	t.Helper()
	var last int64 = -1
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		st, err := os.Stat(b.records)
		if err == nil && st.Size() == last {
			break
		}
		if err == nil {
			last = st.Size()
		}
		time.Sleep(100 * time.Millisecond)
	}
	f, err := os.Open(b.records)
	if err != nil {
		t.Fatalf("records: %v", err)
	}
	defer f.Close()
	var out []binRec
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r binRec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Errorf("record line: %v: %s", err, sc.Bytes())
			continue
		}
		if sid == "" || r.Session == sid {
			out = append(out, r)
		}
	}
	return out
}

func binGet(t *testing.T, url string) (int, string) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+r2Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	bb, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(bb)
}

// freePort is a loopback port nothing listens on (asked of the kernel,
// then released for the binary to take; a random pick could collide).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
