package observe_test

import (
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/syncbuf"
)

// TestThrottled: a hundred refusals within the interval are one line;
// the first after it says how many it stands for.
func TestThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out syncbuf.Buffer
		th := observe.NewThrottled(slog.New(slog.NewTextHandler(&out, nil)), time.Minute)
		for range 100 {
			th.Warn("refused", "remote", "x")
		}
		if n := strings.Count(out.String(), "msg=refused"); n != 1 {
			t.Fatalf("%d lines for 100 refusals within the interval, want 1:\n%s", n, out.String())
		}
		time.Sleep(time.Minute)
		th.Warn("refused", "remote", "y")
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 2 || !strings.Contains(lines[1], "remote=y suppressed=99") {
			t.Fatalf("after the interval: %q, want a second line standing for the 99 others", lines)
		}
		th.Warn("refused")
		if n := strings.Count(out.String(), "msg=refused"); n != 2 {
			t.Errorf("%d lines, want the third refusal counted, not written", n)
		}
	})
}
