package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// TestRunWaitsForQuorum: a gateway that starts running while its cluster
// has lost quorum (its consumers cannot be made) says so and keeps
// trying; once the nodes are back it delivers, and Run never returned.
func TestRunWaitsForQuorum(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cluster, b := bustest.StartClusterJetStream(t, 3, gateway.Assets)
	cluster.Stop(1)
	cluster.Stop(2)

	var logs lockedBuffer
	r := newRecorder()
	g, err := gateway.New(gateway.DefaultConfig(), b, []gateway.Adapter{r}, gateway.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- g.Run(runCtx) }()
	bustest.Eventually(t, time.Minute, func() error {
		select {
		case err := <-done:
			t.Fatalf("Run returned while the cluster had no quorum: %v", err)
		default:
		}
		if !strings.Contains(logs.String(), "nats not ready; retrying") {
			return fmt.Errorf("the gateway never said it was waiting; log:\n%s", logs.String())
		}
		return nil
	})

	cluster.Start(1)
	cluster.Start(2)
	out, _ := proto.Marshal(&nanofleetv1.OutboundMessage{Id: "r1", Channel: "test", ChatId: "c1", Content: "back", Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL})
	if err := bustest.PublishRetrying(ctx, b, b.Space.Outbound("test", "c1"), out); err != nil {
		t.Fatalf("publish after the nodes came back: %v", err)
	}
	select {
	case m := <-r.delivered:
		if m.GetId() != "r1" {
			t.Errorf("delivered %q, want r1", m.GetId())
		}
	case err := <-done:
		t.Fatalf("Run returned: %v", err)
	case <-ctx.Done():
		t.Fatalf("reply never delivered; log:\n%s", logs.String())
	}
	stop()
	if err := bustest.Receive(t, done, 30*time.Second); err != nil {
		t.Errorf("Run after stop = %v", err)
	}
}

// TestStoreWaitsForAStreamLeader: a message stored while the inbound
// stream has no leader (its node died, and the other replicas take
// seconds to elect another) is stored once the stream has one again. The
// store failed at once ("no response from stream"): the API answered
// 503 "The fleet is not reachable", the web chat "could not be sent",
// and a platform's event was refused, for the 9–10 s an election took
// after a node was killed.
func TestStoreWaitsForAStreamLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cluster, b := bustest.StartClusterJetStream(t, 3, gateway.Assets)
	g := newPublisher(t, b)
	// Without quorum the inbound stream has no leader: its subjects
	// answer nobody.
	cluster.LoseQuorum(ctx, b, b.Space.Inbound("probe", "p"))
	in := &nanofleetv1.InboundMessage{Id: "update-1", Channel: "telegram", ChatId: "42", Content: "hello"}
	took, err := cluster.RegainQuorum(func() error {
		_, err := g.Store(ctx, in)
		return err
	})
	if err != nil {
		t.Fatalf("store while the stream elected a leader: %v", err)
	}
	t.Logf("stored %s after the node was started again", took.Round(time.Millisecond))
	stream, err := b.JS.Stream(ctx, b.Space.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.GetLastMsgForSubject(ctx, b.Space.Inbound("telegram", "42")); err != nil {
		t.Errorf("the message is not in the inbound stream: %v", err)
	}
}

// lockedBuffer is a bytes.Buffer a logger and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
