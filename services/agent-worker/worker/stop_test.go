package worker

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// TestStopReachesTheModelLoop: a stop request ends a turn's model loop
// only for a turn of a message before the /stop, and one that comes while
// the turn is starting (claimed, not in its loop yet) ends the loop as
// soon as it begins; such a stop was dropped, or cancelled the turn's
// first reads and failed it.
func TestStopReachesTheModelLoop(t *testing.T) {
	for _, tt := range []struct {
		name      string
		beforeSeq uint64 // of the /stop; 0: a parent stopping a subagent
		inLoop    bool   // the stop comes once the loop runs
		stopped   bool
	}{
		{name: "starting, /stop after the message", beforeSeq: 8, stopped: true},
		{name: "in the loop, /stop after the message", beforeSeq: 8, inLoop: true, stopped: true},
		{name: "starting, any turn", beforeSeq: 0, stopped: true},
		{name: "starting, the /stop's own turn", beforeSeq: 7},
		{name: "in the loop, /stop before the message", beforeSeq: 5, inLoop: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &Worker{running: map[string]*localTurn{}, log: slog.New(slog.DiscardHandler)}
			if !w.claim(t.Context(), "cli:1", 7) {
				t.Fatal("claim refused")
			}
			tr := &turn{w: w, key: "cli:1"}
			data, _ := proto.Marshal(&nanofleetv1.StopRequest{SessionKey: "cli:1", BeforeSeq: tt.beforeSeq})
			stop := func() { w.onStop(&nats.Msg{Data: data}) }
			if !tt.inLoop {
				stop()
			}
			ctx, done := tr.stoppable(t.Context())
			defer done()
			if tt.inLoop {
				stop()
			}
			if got := errors.Is(context.Cause(ctx), errStopped); got != tt.stopped {
				t.Errorf("loop stopped = %v (cause %v), want %v", got, context.Cause(ctx), tt.stopped)
			}
		})
	}
}
