package dashboard_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/offstage/offstage/cmd/offstage/internal/dashboard"
	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/task"
)

// The browser tests drive Debian's chromium (apt-get install chromium)
// with chromedp. Where it is missing they skip, saying so, unless
// OFFSTAGE_REQUIRE_CHROMIUM is set (CI), where they fail.
//
// Screenshots go to the test's artifact directory: run
//
//	go test -run Browser -artifacts -outputdir /tmp/shots ./internal/dashboard
//
// to keep them (under /tmp/shots/_artifacts/…); without -artifacts they
// are written to a temporary directory and removed.

// browser starts a headless chromium and returns its context.
func browser(t testing.TB) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("OFFSTAGE_REQUIRE_CHROMIUM") != "" {
			t.Fatal("chromium is not installed, and OFFSTAGE_REQUIRE_CHROMIUM is set: apt-get install chromium")
		}
		t.Skip("chromium is not installed (apt-get install chromium): the dashboard's browser tests need it")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // as root, as in CI containers
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil { // starts it, outliving any action's deadline
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// run runs actions, with a deadline.
func run(t testing.TB, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// value runs an action that returns a value, with a deadline.
func value[T any](t testing.TB, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// until waits until a JavaScript expression of the page is true.
func until(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr)
}

// clickIn clicks the element sel names, in the page, once it is there:
// the list re-renders its rows as events come, and chromedp.Click, which
// finds the node and then clicks it, failed on a CI run with "Could not
// find node with given id" when a row was replaced between the two.
func clickIn(sel string) chromedp.Action[chromedp.Void] {
	return until(fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el) return false; el.click(); return true; })()`, sel))
}

// login opens the dashboard and logs in through its form.
func login(t testing.TB, ctx context.Context, base string) {
	t.Helper()
	run(t, ctx, "opening the login form", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	run(t, ctx, "logging in", chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Submit(chromedp.CSS("#token")))
	run(t, ctx, "waiting for the list", chromedp.WaitVisible(chromedp.CSS("#tasks")))
	run(t, ctx, "waiting for the list's first events", until(`window.offstage && window.offstage.snapshots > 0`))
}

// screenshot saves the page at width into the artifact directory.
func screenshot(t *testing.T, ctx context.Context, name string, width int64) {
	t.Helper()
	run(t, ctx, "resizing to "+fmt.Sprint(width),
		chromedp.EmulateViewport(width, 844),
		chromedp.Sleep(100*time.Millisecond), // a relayout
	)
	png := value(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	path := filepath.Join(t.ArtifactDir(), fmt.Sprintf("%s-%d.png", name, width))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// TestBrowserListDetailStop (issue 26): in Chromium, the list shows a
// running task as it starts, without a reload; its page shows output
// arriving; the stop button stops it. Screenshots at 1280 and 390 pixels.
func TestBrowserListDetailStop(t *testing.T) {
	ctx := browser(t)
	f := newFleet(t, true)
	login(t, ctx, f.srv.URL)
	f.ticker(t, "make test", time.Hour) // a second row, for the screenshots
	id := f.ticker(t, "while true; do date; sleep 0.1; done", 100*time.Millisecond)
	started := time.Now()
	row := fmt.Sprintf(`tr[data-key="%s/%s"][data-state="running"]`, f.session, id)
	run(t, ctx, "waiting for the running task in the list", chromedp.WaitVisible(chromedp.CSS(row)))
	t.Logf("the running task showed in the list %v after it started (no reload)", time.Since(started).Round(time.Millisecond))
	reloads := value(t, ctx, "counting page loads", chromedp.Evaluate[int](`performance.getEntriesByType("navigation").length`))
	if reloads != 1 {
		t.Errorf("%d page loads, want 1 (no reload)", reloads)
	}
	// Every control is named for a screen reader: inputs by a label,
	// buttons and links by their text.
	unnamed := value(t, ctx, "checking labels", chromedp.Evaluate[[]string](`[...document.querySelectorAll("input, select, textarea, button, a[href]")]
		.filter(el => el.type !== "hidden" && !(el.labels && el.labels.length) && !el.getAttribute("aria-label") && !el.textContent.trim())
		.map(el => el.outerHTML)`))
	if len(unnamed) > 0 {
		t.Errorf("controls without a label or text: %q", unnamed)
	}
	for _, w := range []int64{1280, 390} {
		screenshot(t, ctx, "list", w)
	}
	run(t, ctx, "back to a desktop's width", chromedp.EmulateViewport(1280, 900))

	// Its page, by keyboard: focus the link and press Enter.
	run(t, ctx, "opening the task",
		chromedp.Focus(chromedp.CSS(row+` a`)),
		chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(chromedp.CSS(`#task-view`)),
		until(`document.getElementById("output").textContent.includes("line 2\n")`),
	)
	first := value(t, ctx, "reading the output", chromedp.TextContent(chromedp.CSS("#output")))
	run(t, ctx, "waiting for more output",
		until(fmt.Sprintf(`document.getElementById("output").textContent.length > %d`, len(first)+20)))
	later := value(t, ctx, "reading the output", chromedp.TextContent(chromedp.CSS("#output")))
	if !strings.HasPrefix(later, "line 1\nline 2\n") || len(later) <= len(first) {
		t.Errorf("output went from %q to %q, want more lines arriving in order", first, later)
	}
	for _, w := range []int64{1280, 390} {
		screenshot(t, ctx, "task", w)
	}
	run(t, ctx, "back to a desktop's width", chromedp.EmulateViewport(1280, 900))

	run(t, ctx, "stopping it",
		chromedp.SendKeys(chromedp.CSS("#reason"), "runaway loop"),
		chromedp.Click(chromedp.CSS("#stop")),
		chromedp.WaitVisible(chromedp.CSS(`#facts[data-state="canceled"]`)),
		until(`document.getElementById("output-state").textContent.includes("ended")`),
	)
	got, err := f.store.Task(t.Context(), f.session, id)
	if err != nil || got.State != "canceled" {
		t.Errorf("after the stop button, the journal has %+v, %v; want it canceled", got, err)
	}
	f.mu.Lock()
	if len(f.canceled) != 1 || !strings.Contains(f.canceled[0], "runaway loop") {
		t.Errorf("Cancel calls: %q, want one with the reason", f.canceled)
	}
	f.mu.Unlock()
	disabled := value(t, ctx, "reading the button", chromedp.Evaluate[bool](`document.getElementById("stop").disabled`))
	if !disabled {
		t.Error("the stop button is still enabled on a task that ended")
	}
	run(t, ctx, "back to the list",
		chromedp.Click(chromedp.CSS("#back")),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-key="%s/%s"][data-state="canceled"]`, f.session, id))))
}

// TestBrowserShowsMarkupAsText pins issue 34's seventh item: nothing
// showed the dashboard escapes what tasks say, so setting a label or the
// output with innerHTML passed every test. A task labelled with an
// <img> whose onerror sets a global, printing <b>x</b>, shows both
// literally: no element in the row's label cell, the heading or #output,
// and the global unset (the page's Content-Security-Policy would block
// the handler too; the elements are what innerHTML would leave).
func TestBrowserShowsMarkupAsText(t *testing.T) {
	const label = `<img src=x onerror="window.pwned=1">`
	const printed = "<b>x</b>\n"
	ctx := browser(t)
	f := newFleet(t, false)
	login(t, ctx, f.srv.URL)
	ready := make(chan struct{})
	id, err := f.view.Spawn(task.Spec{Kind: "shell", Label: label}, func(ctx context.Context, h *task.Handle) (string, error) {
		path := f.logPath(t, h.ID())
		if err := os.WriteFile(path, []byte(printed), 0o600); err != nil {
			return "", err
		}
		f.log.Process(h.ID(), 0, 0, path)
		close(ready)
		<-ctx.Done()
		return "", ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	<-ready
	row := fmt.Sprintf(`tr[data-key="%s/%s"]`, f.session, id)
	run(t, ctx, "waiting for the task in the list", chromedp.WaitVisible(chromedp.CSS(row)))
	type shown struct {
		Text     string `json:"text"`
		Elements int    `json:"elements"`
		Pwned    bool   `json:"pwned"`
		Images   int    `json:"images"`
	}
	look := func(what, el string) shown {
		return value(t, ctx, "reading "+what, chromedp.Evaluate[shown](fmt.Sprintf(`(() => { const el = %s;
			return {text: el.textContent, elements: el.querySelectorAll("*").length,
				pwned: typeof window.pwned !== "undefined", images: document.querySelectorAll("img").length}; })()`, el)))
	}
	cell := look("the label cell", fmt.Sprintf(`document.querySelector(%q).cells[2]`, row))
	if cell != (shown{Text: label}) {
		t.Errorf("the list's label cell: %+v, want the label as text, no element, no image, window.pwned unset", cell)
	}
	run(t, ctx, "opening the task",
		clickIn(row+` a`),
		chromedp.WaitVisible(chromedp.CSS(`#task-view`)),
		until(`document.getElementById("output").textContent.includes("x")`),
	)
	if out := look("the output", `document.getElementById("output")`); out != (shown{Text: printed}) {
		t.Errorf("#output: %+v, want %q as text, no element, no image, window.pwned unset", out, printed)
	}
	if h := look("the heading", `document.getElementById("task-h")`); !strings.Contains(h.Text, label) || h.Elements != 0 || h.Pwned || h.Images != 0 {
		t.Errorf("the task's heading: %+v, want the label as text, no element", h)
	}
}

// TestBrowserAgentTaskShowsItsTokens (issue 39): a sub-agent's page shows
// the tokens it spent, as the journal has them, and follows them as they
// grow while it runs. Screenshots of the page at 1280 and 390 pixels.
func TestBrowserAgentTaskShowsItsTokens(t *testing.T) {
	ctx := browser(t)
	f := newFleetWith(t, false, func(o *dashboard.Options) {
		// As offstage's own is, at a price of 2 per million in, 0.5
		// cached, 8 out.
		o.Cost = func(_ context.Context, t journal.Task) (float64, bool) {
			u := t.Usage
			return (float64(u.InputTokens-u.CachedInputTokens)*2 + float64(u.CachedInputTokens)*0.5 + float64(u.OutputTokens)*8) / 1e6, true
		}
	})
	login(t, ctx, f.srv.URL)
	more := make(chan struct{})
	id, err := f.view.Spawn(task.Spec{Kind: "agent", Label: "researcher: compare the three retry libraries"}, func(ctx context.Context, h *task.Handle) (string, error) {
		// As the agent loop does: a call's usage, then the progress that
		// carries it to the journal.
		h.AddUsage(task.Usage{InputTokens: 48200, OutputTokens: 1300, CachedInputTokens: 40000, ModelCalls: 7})
		h.Progress(7, "reading the third library's docs")
		select {
		case <-more:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		h.AddUsage(task.Usage{InputTokens: 1_900_000, OutputTokens: 2100, ModelCalls: 1})
		h.Progress(8, "comparing them")
		<-ctx.Done()
		return "", ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	row := fmt.Sprintf(`tr[data-key="%s/%s"]`, f.session, id)
	facts := `(() => { const dt = [...document.querySelectorAll("#facts dt")].find(el => el.textContent === "Tokens");
		return dt ? dt.nextElementSibling.textContent : ""; })()`
	run(t, ctx, "opening the sub-agent's page",
		chromedp.WaitVisible(chromedp.CSS(row)),
		clickIn(row+` a`),
		chromedp.WaitVisible(chromedp.CSS(`#task-view`)),
		until(facts+` !== ""`),
	)
	const want = "48.2k in (40k cached), 1.3k out, 7 model calls, cost 0.05"
	if got := value(t, ctx, "reading its tokens", chromedp.Evaluate[string](facts)); got != want {
		t.Errorf("Tokens: %q, want %q", got, want)
	}
	// A sub-agent has no output log: the page says so at once, with no
	// empty box for output that will never come.
	run(t, ctx, "waiting for the page to say there is no output log",
		until(`document.getElementById("output-state").textContent.includes("no output log") && document.getElementById("output").hidden`))
	for _, w := range []int64{1280, 390} {
		screenshot(t, ctx, "agent-task", w)
	}
	run(t, ctx, "back to a desktop's width", chromedp.EmulateViewport(1280, 900))
	close(more)
	const grown = "1.9M in (40k cached), 3.4k out, 8 model calls, cost 3.86"
	run(t, ctx, "waiting for the tokens to grow", until(fmt.Sprintf(`%s === %q`, facts, grown)))
}
