package fleet_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// runCLI runs a nanofleet CLI command and returns its combined output.
func runCLI(ctx context.Context, bin string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// lastReplies reads a whole stream and returns the last durable reply per
// inbound id.
func lastReplies(t *testing.T, js jetstream.JetStream, stream string) map[string]*nanofleetv1.OutboundMessage {
	t.Helper()
	out := map[string]*nanofleetv1.OutboundMessage{}
	for _, o := range storedReplies(t, js, stream) {
		out[o.GetReplyTo()] = o
	}
	return out
}

// storedReplies reads a whole stream of outbound messages, in order.
func storedReplies(t *testing.T, js jetstream.JetStream, stream string) []*nanofleetv1.OutboundMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*nanofleetv1.OutboundMessage
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		o := &nanofleetv1.OutboundMessage{}
		if proto.Unmarshal(m.Data, o) == nil {
			out = append(out, o)
		}
	}
	return out
}

// listenAddr returns a loopback address that was free a moment ago.
func listenAddr(t *testing.T) string { return svctest.FreeAddr(t) }
