package approvals

import (
	"context"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/hooksproxy/hooksproxy/points"
)

// chromiumPath is where Debian's chromium package puts the browser.
const chromiumPath = "/usr/bin/chromium"

// screenshotPath is where the test leaves a picture of the page with two
// pending approvals, for the docs, when run with -screenshot (ids and times
// differ on every run, so a plain run leaves the tree untouched).
var screenshotPath = filepath.Join("..", "docs", "approvals-ui.png")

var writeScreenshot = flag.Bool("screenshot", false, "write the approval page screenshot to "+screenshotPath)

// TestBrowserApproveReject drives the approval page in headless Chromium:
// enter the token, approve one pending approval and reject the other, and
// check that both Resolve calls answer accordingly, that hostile context
// text is shown as text, and that the page raised no exception, dialog or
// CSP violation.
func TestBrowserApproveReject(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("headless browser test skipped: %s not found (apt-get install -y chromium)", chromiumPath)
	}
	if testing.Short() {
		t.Skip("headless browser test skipped in -short mode")
	}

	c, w := newTestConsole(t, ConsoleOptions{})
	srv := httptest.NewServer(c.Handler(tokenFunc(testToken))) // loopback only
	defer srv.Close()

	rctx, cancelResolves := context.WithCancel(context.Background())
	defer cancelResolves()
	hostile := `{"interception_point":"pre_tool_call","target":{"name":"send_email","arguments":{"body":"<script>alert(1)</script><img src=x onerror=alert(2)>"}}}`
	toApprove := resolveAsync(rctx, c, testRequest(sp("sha256:approve-me"), hostile))
	w.waitLen(1)
	rejectReq := testRequest(sp("sha256:reject-me"),
		`{"interception_point":"pre_tool_call","target":{"name":"delete_files","arguments":{"path":"/srv/data"}}}`)
	rejectReq.Verdict = points.Escalate("dangerous_tool", "delete_files needs a person")
	toReject := resolveAsync(rctx, c, rejectReq)
	w.waitLen(2)
	var approveID, rejectID string
	for _, a := range c.List() {
		if *a.ContextIdentity == "sha256:approve-me" {
			approveID = a.ID
		} else {
			rejectID = a.ID
		}
	}

	// A bound for the whole browser session, so a hung browser fails the
	// test instead of the run; it is not an assertion about speed.
	bctx, cancelAll := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancelAll()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1100, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(bctx, opts...)
	defer cancelAlloc()
	ctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()

	var (
		mu       sync.Mutex
		problems []string
	)
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			problems = append(problems, "dialog opened: "+e.Message)
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+e.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			// Favicon 404s are network noise; CSP violations and errors
			// from our script are not.
			if e.Entry.Source == "security" || strings.Contains(e.Entry.Text, "Content Security Policy") ||
				(e.Entry.Level == "error" && e.Entry.Source != "network") {
				problems = append(problems, fmt.Sprintf("log %s/%s: %s", e.Entry.Source, e.Entry.Level, e.Entry.Text))
			}
		}
	}); err != nil {
		t.Fatal(err)
	}

	card := func(id string) string { return `article.card[data-id="` + id + `"]` }
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+UIPath),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), testToken),
		chromedp.Click(chromedp.ID("use-token")),
		chromedp.WaitVisible(chromedp.CSS(card(approveID))),
		chromedp.WaitVisible(chromedp.CSS(card(rejectID))),
	); err != nil {
		t.Fatalf("page did not list the approvals: %v", err)
	}

	// The hostile text is displayed as text, and added no element.
	shown, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(card(approveID)+" pre.context")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(shown, `<script>alert(1)</script><img src=x onerror=alert(2)>`) {
		t.Fatalf("context shown as %q", shown)
	}
	counts, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[document.scripts.length, document.images.length, document.querySelectorAll("article.card").length]`))
	if err != nil {
		t.Fatal(err)
	}
	if counts[0] != 1 || counts[1] != 0 || counts[2] != 2 {
		t.Fatalf("scripts, images, cards = %v", counts)
	}
	stored, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem("hooksproxy.adminToken")`))
	if err != nil || stored != testToken {
		t.Fatalf("token in sessionStorage = %q, %v", stored, err)
	}

	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if *writeScreenshot {
		if err := os.MkdirAll(filepath.Dir(screenshotPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(screenshotPath, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(card(approveID)+" input.note"), "looked fine"),
		chromedp.Click(chromedp.CSS(card(approveID)+" button.approve")),
		chromedp.WaitNotPresent(chromedp.CSS(card(approveID))),
		chromedp.Click(chromedp.CSS(card(rejectID)+" button.reject")),
		chromedp.WaitNotPresent(chromedp.CSS(card(rejectID))),
	); err != nil {
		t.Fatalf("deciding through the page: %v", err)
	}

	a := <-toApprove
	if a.err != nil || a.res.Outcome != "approve" || *a.res.ContextIdentity != "sha256:approve-me" || string(a.res.Verdict) != `{"decision":"allow"}` {
		t.Fatalf("approved Resolve = %s, %v", resJSON(a.res), a.err)
	}
	r := <-toReject
	if r.err != nil || r.res.Outcome != "reject" || *r.res.ContextIdentity != "sha256:reject-me" ||
		string(r.res.Verdict) != `{"decision":"deny","reason":"dangerous_tool"}` {
		t.Fatalf("rejected Resolve = %s, %v", resJSON(r.res), r.err)
	}
	status, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.ID("status")))
	if err != nil || !strings.Contains(status, "Rejected "+rejectID) {
		t.Fatalf("status line = %q, %v", status, err)
	}
	if c.Len() != 0 {
		t.Fatalf("leftover %d", c.Len())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("browser reported:\n%s", strings.Join(problems, "\n"))
	}
}
