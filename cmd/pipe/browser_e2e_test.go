//go:build e2e

package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// browser is a headless Chromium tab for a test, w×h pixels, that records
// what a page must never do: a console error or warning, an exception, a
// log error, a fetch of anything but a file or data URL.
type browser struct {
	ctx      context.Context
	mu       sync.Mutex
	problems []string
}

// newBrowser starts Chromium (chromium(t): it fails under PIPE_CI=1 when
// missing) for at most timeout; it is stopped with the test.
func newBrowser(t *testing.T, w, h int, timeout time.Duration) *browser {
	t.Helper()
	actx, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(w, h))...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancel = context.WithTimeout(ctx, timeout)
	t.Cleanup(cancel)
	b := &browser{ctx: ctx}
	chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning || e.Type == runtime.ConsoleAPICalledTypeAssert {
				b.problems = append(b.problems, fmt.Sprintf("console %s: %v", e.Type, e.Args))
			}
		case *runtime.EventExceptionThrown:
			b.problems = append(b.problems, "exception: "+e.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError || e.Entry.Level == log.EntryLevelWarning {
				b.problems = append(b.problems, fmt.Sprintf("log %s: %s %s", e.Entry.Level, e.Entry.Text, e.Entry.URL))
			}
		case *network.EventRequestWillBeSent:
			if !strings.HasPrefix(e.Request.URL, "file://") && !strings.HasPrefix(e.Request.URL, "data:") {
				b.problems = append(b.problems, "fetched "+e.Request.URL)
			}
		}
	})
	return b
}

// load opens the file at path and waits for its body.
func (b *browser) load(t *testing.T, path string) {
	t.Helper()
	// chromedp enables the runtime, log and network domains itself.
	if err := chromedp.Do(b.ctx, chromedp.Navigate("file://"+path), chromedp.WaitReady("body")); err != nil {
		t.Fatalf("chromium: %v", err)
	}
}

// checkProblems fails the test with what the pages reported.
func (b *browser) checkProblems(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.problems) > 0 {
		t.Errorf("the pages reported problems:\n  %s", strings.Join(b.problems, "\n  "))
	}
}
