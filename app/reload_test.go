package app_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hooksproxy/hooksproxy/app"
	"github.com/hooksproxy/hooksproxy/points"
	"github.com/hooksproxy/hooksproxy/scripted"
)

// reloadConfig is a config whose binding ids carry its version, so every
// record says which config decided it. denyOutput, when set, is a content
// deny pattern at output with reason blocked_<version>.
func reloadConfig(upstreamURL, version, denyOutput string) string {
	out := fmt.Sprintf("    - {id: %s-output, kind: hooksproxy.content, at: [output], config: {deny: ['never-matches-%s']}}\n", version, version)
	if denyOutput != "" {
		out = fmt.Sprintf("    - {id: %s-output, kind: hooksproxy.content, at: [output], config: {deny: ['%s'], reason: blocked_%s}}\n", version, denyOutput, version)
	}
	return fmt.Sprintf(`upstream: {base_url: %q}
agent: {id: reload-agent}
hooks:
  declaration: agent-hooks-declaration/1.0
  bindings:
%s    - {id: %s-allow, kind: hooksproxy.allow_all}
`, upstreamURL, out, version)
}

// writeAtomic replaces path's content in one rename, so a reader (the
// watcher) never sees half a file.
func writeAtomic(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// reloadApp builds an app from the file at path with a memory sink.
func reloadApp(t *testing.T, path string, onReload func(bool, error)) (*app.App, *httptest.Server, *points.MemorySink) {
	t.Helper()
	sink := points.NewMemorySink(0)
	a := loadApp(t, path, app.Options{Sink: sink, OnReload: onReload})
	a.Server.Start()
	srv := httptest.NewServer(a.Server)
	t.Cleanup(func() { srv.Close(); a.Server.Close() })
	return a, srv, sink
}

// versionsOf returns the config versions named by a session's records
// (binding names are "<version>-...").
func versionsOf(recs []*points.Record) map[string]int {
	vs := map[string]int{}
	for _, r := range recs {
		for _, v := range r.Verdicts {
			ver, _, _ := strings.Cut(v.Name, "-")
			vs[ver]++
		}
	}
	return vs
}

// TestReloadUnderLoad rewrites the config while 20 clients send requests:
// a valid change applies to every request that starts after Reload
// returns, an invalid one is refused and the running policy stays, and no
// request sees two configs or fails for a reason other than the policy in
// force.
func TestReloadUnderLoad(t *testing.T) {
	const (
		workers   = 20
		perWorker = 50
		// Each worker pauses at these request numbers until the matching
		// reload is done, so both reloads happen with requests in flight
		// and requests follow each of them.
		holdV2      = 30
		holdInvalid = 42
	)
	up := httptest.NewServer(scripted.New(scripted.Rule{Reply: scripted.Text("Hello from the scripted model.")}))
	defer up.Close()
	path := filepath.Join(t.TempDir(), "hooksproxy.yaml")
	writeAtomic(t, path, reloadConfig(up.URL, "v1", ""))
	a, srv, sink := reloadApp(t, path, nil)

	// phase: 1 = v1 in force, 2 = v2 installed (Reload returned), 3 = the
	// invalid file refused (v2 still in force).
	var phase atomic.Int32
	phase.Store(1)
	v2Done, invalidDone := make(chan struct{}), make(chan struct{})
	var sent atomic.Int64
	reached := func(n int64) <-chan struct{} { // closes when sent >= n
		ch := make(chan struct{})
		go func() {
			for sent.Load() < n {
				time.Sleep(time.Millisecond)
			}
			close(ch)
		}()
		return ch
	}
	type outcome struct {
		phase   int32 // phase when the request started
		status  int
		code    string
		session string
		err     error
	}
	results := make(chan outcome, workers*perWorker)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				switch i {
				case holdV2:
					<-v2Done
				case holdInvalid:
					<-invalidDone
				}
				ph := phase.Load()
				r, err := (&proxyUnderTest{srv: srv}).chat(context.Background(), chatBody(fmt.Sprintf("hello from %d/%d", w, i), i%2 == 1),
					"X-Request-Id", fmt.Sprintf("w%d-r%d", w, i))
				sent.Add(1)
				results <- outcome{phase: ph, status: r.status, code: r.code(), session: r.session, err: err}
			}
		}()
	}

	// A valid change while requests run: deny the answer the model gives.
	<-reached(workers * holdV2 / 2)
	writeAtomic(t, path, reloadConfig(up.URL, "v2", "(?i)scripted model"))
	if err := a.Reload(); err != nil {
		t.Fatalf("valid reload: %v", err)
	}
	phase.Store(2)
	close(v2Done)

	// An invalid change: a regex that does not compile.
	<-reached(workers * (holdV2 + holdInvalid) / 2)
	writeAtomic(t, path, reloadConfig(up.URL, "v3", "(unclosed"))
	if err := a.Reload(); err == nil {
		t.Fatal("a config with an invalid regex reloaded")
	} else if !strings.Contains(err.Error(), "v3-output") {
		t.Errorf("reload error does not name the binding: %v", err)
	}
	phase.Store(3)
	close(invalidDone)

	wg.Wait()
	close(results)

	bySession := map[string][]*points.Record{}
	for _, r := range sink.Records() {
		bySession[r.SessionID] = append(bySession[r.SessionID], r)
	}
	counts := map[string]int{}
	for o := range results {
		if o.err != nil {
			t.Errorf("transport error: %v", o.err)
			continue
		}
		if o.session == "" {
			t.Errorf("answer %d %s without a session header", o.status, o.code)
			continue
		}
		vs := versionsOf(bySession[o.session])
		if len(vs) != 1 {
			t.Errorf("session %s saw configs %v, want exactly one", o.session, vs)
			continue
		}
		var ver string
		for v := range vs {
			ver = v
		}
		switch {
		case ver == "v1" && o.status == http.StatusOK:
		case ver == "v2" && o.status == http.StatusForbidden && o.code == "blocked_v2":
		default:
			t.Errorf("session %s under %s answered %d %q", o.session, ver, o.status, o.code)
			continue
		}
		if o.phase >= 2 && ver != "v2" {
			t.Errorf("a request started after the reload ran under %s", ver)
		}
		counts[fmt.Sprintf("phase%d/%s", o.phase, ver)]++
	}
	if counts["phase1/v1"] == 0 || counts["phase2/v2"] == 0 || counts["phase3/v2"] == 0 {
		t.Errorf("the load did not straddle both reloads: %v", counts)
	}
	t.Logf("requests by phase/config: %v", counts)
	if got := a.Config().Hooks.Bindings()[0].Name; got != "v2-output" {
		t.Errorf("config in force has %s, want v2-output", got)
	}
}

// TestWatchPicksUpChange rewrites the file under a running watcher: a valid
// change applies within a few seconds, an invalid one is refused and the
// policy in force stays.
func TestWatchPicksUpChange(t *testing.T) {
	up := httptest.NewServer(scripted.New(scripted.Rule{Reply: scripted.Text("Hello from the scripted model.")}))
	defer up.Close()
	path := filepath.Join(t.TempDir(), "hooksproxy.yaml")
	writeAtomic(t, path, reloadConfig(up.URL, "v1", ""))
	reloads := make(chan error, 16)
	a, srv, _ := reloadApp(t, path, func(ok bool, err error) { reloads <- err })
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() { a.Watch(ctx, 10*time.Millisecond); close(watched) }()
	defer func() { cancel(); <-watched }()

	p := &proxyUnderTest{srv: srv}
	expect(t, p.mustChat(t, "hello"), http.StatusOK, "", "")

	waitReload := func() error {
		t.Helper()
		select {
		case err := <-reloads:
			return err
		case <-time.After(5 * time.Second):
			t.Fatal("the watcher did not reload within 5s")
			return nil
		}
	}
	writeAtomic(t, path, reloadConfig(up.URL, "v2", "(?i)scripted model"))
	if err := waitReload(); err != nil {
		t.Fatalf("watch reload: %v", err)
	}
	expect(t, p.mustChat(t, "hello"), http.StatusForbidden, "blocked_v2", points.Output)

	writeAtomic(t, path, "hooks: [this is not a config\n")
	if err := waitReload(); err == nil {
		t.Fatal("the watcher accepted a broken file")
	}
	expect(t, p.mustChat(t, "hello"), http.StatusForbidden, "blocked_v2", points.Output)
}

// A reload applies passthrough: a path removed from it is refused (404)
// from then on, one added is forwarded.
func TestReloadAppliesPassthrough(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path":%q}`, r.URL.Path)
	}))
	t.Cleanup(up.Close)
	conf := func(passthrough, agent string) string {
		return fmt.Sprintf("upstream: {base_url: %q}\npassthrough: [%s]\nagent: {id: %s}\nhooks:\n  declaration: agent-hooks-declaration/1.0\n  bindings:\n    - {id: allow, kind: hooksproxy.allow_all}\n", up.URL, passthrough, agent)
	}
	path := filepath.Join(t.TempDir(), "hp.yaml")
	writeAtomic(t, path, conf("/v1/embeddings", "first"))
	a, srv, sink := reloadApp(t, path, nil)
	get := func(p string) int {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if get("/v1/embeddings") != 200 || get("/v1/models") != 404 {
		t.Fatal("passthrough before the reload")
	}
	writeAtomic(t, path, conf("/v1/models", "second"))
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := get("/v1/embeddings"); got != 404 {
		t.Fatalf("a removed passthrough path answered %d after the reload", got)
	}
	if got := get("/v1/models"); got != 200 {
		t.Fatalf("an added passthrough path answered %d after the reload", got)
	}
	_ = sink
}

// bindingsSeen records the bindings each loaded configuration announces.
type bindingsSeen struct {
	mu    sync.Mutex
	loads [][]string
}

func (b *bindingsSeen) Emission(*points.Record, time.Duration)                          {}
func (b *bindingsSeen) Interceptor(string, points.Point, points.Verdict, time.Duration) {}
func (b *bindingsSeen) BindingsLoaded(bs []points.Binding) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var names []string
	for _, x := range bs {
		names = append(names, x.Name)
	}
	b.loads = append(b.loads, names)
}

// The metrics start a binding's failure counters when its configuration
// loads, at start and at every reload, so an alert sees its first failure.
func TestBindingsAnnouncedAtStartAndReload(t *testing.T) {
	up := httptest.NewServer(scripted.New())
	defer up.Close()
	path := filepath.Join(t.TempDir(), "hooksproxy.yaml")
	writeAtomic(t, path, reloadConfig(up.URL, "v1", ""))
	seen := &bindingsSeen{}
	a := loadApp(t, path, app.Options{Observer: seen})
	defer a.Server.Close()
	writeAtomic(t, path, reloadConfig(up.URL, "v2", ""))
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	got := fmt.Sprint(seen.loads)
	if want := "[[v1-output v1-allow] [v2-output v2-allow]]"; got != want {
		t.Errorf("bindings announced %s, want %s", got, want)
	}
}

// loadApp loads the file at path and builds an app from it.
func loadApp(t *testing.T, path string, opts app.Options) *app.App {
	t.Helper()
	cfg, err := app.Load(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(cfg, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A reload that changes records (or another restart-only setting) says in
// the log that it applies only after a restart.
func TestReloadSaysRecordsNeedARestart(t *testing.T) {
	up := httptest.NewServer(scripted.New())
	defer up.Close()
	path := filepath.Join(t.TempDir(), "hooksproxy.yaml")
	writeAtomic(t, path, reloadConfig(up.URL, "v1", ""))
	var logs strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logs.Write(b) }), nil))
	a := loadApp(t, path, app.Options{Logger: log})
	defer a.Server.Close()
	writeAtomic(t, path, reloadConfig(up.URL, "v1", "")+"records: {file: "+filepath.Join(t.TempDir(), "r.jsonl")+"}\n")
	// Twice: the second reload still runs the sink the process started
	// with, so it says so again.
	for i := range 2 {
		if err := a.Reload(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		n := strings.Count(logs.String(), "records changes apply only after a restart")
		named := strings.Count(logs.String(), "changed=records")
		mu.Unlock()
		if n != i+1 || named != i+1 {
			t.Fatalf("reload %d: %d warnings in\n%s", i+1, n, logs.String())
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
