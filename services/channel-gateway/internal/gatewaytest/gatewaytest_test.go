package gatewaytest_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/gatewaytest"
)

func TestLogsWaitForALineWrittenLater(t *testing.T) {
	var logs gatewaytest.Logs
	log := slog.New(slog.NewTextHandler(&logs, nil))
	go func() {
		log.Info("first")
		log.Info("lease held", "n", 1)
		log.Info("lease held", "n", 2)
	}()
	logs.WaitFor(t, "n=2", 5*time.Second)
	if n := logs.Count("lease held"); n != 2 {
		t.Fatalf("Count = %d, want 2:\n%s", n, logs.String())
	}
}
