package webchat_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/browsertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/webchat"
)

// browser starts headless Chromium, or skips the test without it.
func browser(t *testing.T) context.Context {
	t.Helper()
	return browsertest.Start(t, 45*time.Second)
}

func TestBrowserChat(t *testing.T) {
	h := start(t, webchat.Config{MaxUploadBytes: 1024})
	ctx := browser(t)

	const answer = `#messages .msg.assistant.done .body strong`
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return v
	}
	err := chromedp.Do(ctx,
		chromedp.Navigate(h.srv.URL+"/?token="+token),
		chromedp.WaitVisible(`#messages[data-loaded]`),
		chromedp.SendKeys(`#input`, "what is 2+2?"),
		chromedp.Click(`#send`),
		// The deltas show while the answer is still being written.
		chromedp.WaitVisible(`#messages .msg.assistant.streaming[data-deltas="3"]`),
	)
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	if got := text(`#messages .msg.assistant.streaming .body`); got != "Hello, world!" {
		t.Errorf("streamed text shows %q", got)
	}
	close(h.release)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(answer)); err != nil {
		t.Fatalf("final answer: %v", err)
	}
	if got, code := text(answer), text(`#messages .msg.assistant.done .body code`); got != "Hello, world!" || code != "what is 2+2?" {
		t.Errorf("answer shows %q / %q", got, code)
	}
	deltas, err := chromedp.Run(ctx, chromedp.AttributeValue(`#messages .msg.assistant.done`, "data-deltas"))
	if n, _ := strconv.Atoi(deltas.Value); err != nil || n != 3 {
		t.Errorf("the answer streamed %q deltas (%v), want 3", deltas.Value, err)
	}
	if hint, err := chromedp.Run(ctx, chromedp.TextContent(`#messages .msg.assistant details.work li.tool_hint`)); err != nil || hint != "read notes.md" {
		t.Errorf("tool hint shows %q (%v)", hint, err)
	}

	// After a reload the conversation comes back from the session store.
	if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(`#messages[data-loaded] .msg.user`), chromedp.WaitVisible(answer)); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if user, got, title := text(`#messages .msg.user`), text(answer), text(`#conversations li.active`); user != "what is 2+2?" || got != "Hello, world!" || title != "what is 2+2?" {
		t.Errorf("after reload: user %q, answer %q, title %q", user, got, title)
	}

	// An oversize file is refused with a message in the chat.
	big := filepath.Join(t.TempDir(), "big.txt")
	if err := os.WriteFile(big, []byte(strings.Repeat("x", 4096)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles(`#file`, []string{big}, chromedp.NodeReady), chromedp.WaitVisible(`#messages .msg.error`)); err != nil {
		t.Fatalf("upload: %v", err)
	}
	if notice := text(`#messages .msg.error`); !strings.Contains(notice, "too large") {
		t.Errorf("oversize upload notice = %q", notice)
	}
}
