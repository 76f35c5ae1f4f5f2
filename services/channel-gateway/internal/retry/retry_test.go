package retry_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/gatewaytest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/retry"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

func TestUntil(t *testing.T) {
	errDown := errors.New("platform down")
	errToken := errors.New("token rejected")
	tests := []struct {
		name    string
		results []error // what f returns at each call; nil once it answers
		cancel  bool    // ctx ends at the first failure
		want    error
		calls   int
		logged  int
	}{
		{"answers at once", []error{nil}, false, nil, 1, 0},
		{"answers after failures", []error{errDown, errDown, nil}, false, nil, 3, 2},
		{"final error ends the calls", []error{errDown, retry.Final(errToken)}, false, errToken, 2, 1},
		{"ctx ends", []error{errDown}, true, context.Canceled, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &gatewaytest.Logs{}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			calls := 0
			err := retry.Until(ctx, slog.New(slog.NewTextHandler(logs, nil)), "call failed", func(context.Context) error {
				err := tt.results[calls]
				calls++
				if tt.cancel {
					cancel()
				}
				return err
			})
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("Until = %v, want %v", err, tt.want)
			}
			if calls != tt.calls {
				t.Errorf("%d calls, want %d", calls, tt.calls)
			}
			if n := logs.Count("call failed"); n != tt.logged {
				t.Errorf("%d failures logged, want %d:\n%s", n, tt.logged, logs)
			}
			if tt.want == errToken && err != errToken {
				t.Errorf("Until = %q, want the error as it was before Final", err)
			}
		})
	}
}

// TestUntilWithStatus: while the calls fail, the gateway's record of the
// channel says why (with the message logged), as `nanofleet channels
// status` shows it; once a call answers, the record is gone, the failure
// being over. Another gateway's record is not touched.
func TestUntilWithStatus(t *testing.T) {
	b := bustest.StartJetStream(t, status.Assets)
	board, err := status.Open(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	other := board.Reporter("gw-other")
	other.Serving(t.Context(), log, "telegram", "@bot")
	calls := 0
	var seen []status.Record
	err = retry.Until(t.Context(), log, "telegram getMe failed, retrying", func(ctx context.Context) error {
		calls++
		if calls == 1 {
			return errors.New("lookup api.telegram.org: no such host")
		}
		// The first failure's report is written before the wait.
		var err error
		seen, err = board.Records(ctx, "telegram")
		return err
	}, retry.WithStatus(board.Reporter("gw-1"), "telegram"))
	if err != nil {
		t.Fatal(err)
	}
	byGateway := map[string]status.Record{}
	for _, r := range seen {
		byGateway[r.Gateway] = r
	}
	if r := byGateway["gw-1"]; r.State != status.Failed || r.Reason != "telegram getMe failed, retrying: lookup api.telegram.org: no such host" || r.Holder != "gw-1" {
		t.Errorf("record while retrying = %+v", r)
	}
	if r := byGateway["gw-other"]; r.State != status.Connected || len(seen) != 2 {
		t.Errorf("records while retrying = %+v, want gw-other's connected one beside", seen)
	}
	after, err := board.Records(t.Context(), "telegram")
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 1 || after[0].Gateway != "gw-other" {
		t.Errorf("records once started = %+v, want only gw-other's", after)
	}
}
