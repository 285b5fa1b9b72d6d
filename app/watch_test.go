package app_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hooksproxy/hooksproxy/scripted"
)

// A file renamed into place with the size and modification time of the one
// it replaces (cp -p, rsync -t) is still a change: the watcher compares the
// file itself too.
func TestWatchSeesSameSizeSameTimeReplacement(t *testing.T) {
	up := httptest.NewServer(scripted.New())
	defer up.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "hooksproxy.yaml")
	v1 := reloadConfig(up.URL, "v1", "")
	v2 := strings.Replace(v1, "v1", "v2", 1) // the same length
	if len(v1) != len(v2) || v1 == v2 {
		t.Fatal("the two configs must differ at equal length")
	}
	writeAtomic(t, path, v1)
	stamp := time.Unix(1_700_000_000, 0)
	if err := os.Chtimes(path, stamp, stamp); err != nil {
		t.Fatal(err)
	}
	reloads := make(chan struct{}, 1)
	a, _, _ := reloadApp(t, path, func(bool, error) {
		select {
		case reloads <- struct{}{}:
		default:
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() { a.Watch(ctx, 10*time.Millisecond); close(watched) }()
	defer func() { cancel(); <-watched }()

	// Touch until the watcher reloads once: from then on it has looked at
	// this file, whenever its goroutine first ran.
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("the watcher never reloaded on a touch")
		}
		stamp = stamp.Add(time.Hour)
		if err := os.Chtimes(path, stamp, stamp); err != nil {
			t.Fatal(err)
		}
		select {
		case <-reloads:
		case <-time.After(100 * time.Millisecond):
			continue
		}
		break
	}
	time.Sleep(50 * time.Millisecond) // a late reload of the last touch, if any

	next := filepath.Join(dir, "next.yaml")
	if err := os.WriteFile(next, []byte(v2), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(next, stamp, stamp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, path); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if bs := a.Config().Hooks.Bindings(); len(bs) > 0 && strings.HasPrefix(bs[0].Name, "v2") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a replacement with the same size and time was not reloaded within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
