package gateway_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// eager is a live adapter that reports, as its Run starts (when it may
// take its first event, whose turn can show progress at once), whether
// the server already routes the channel's live messages anywhere.
type eager struct {
	interest func() bool
	ran      chan bool
}

func (e *eager) Channel() string { return "eager" }

func (e *eager) Run(ctx context.Context, _ gateway.Inbox) error {
	e.ran <- e.interest()
	<-ctx.Done()
	return nil
}

func (e *eager) Deliver(context.Context, *nanofleetv1.OutboundMessage) error     { return nil }
func (e *eager) DeliverLive(context.Context, *nanofleetv1.OutboundMessage) error { return nil }

// TestLiveFollowedBeforeTheAdapterRuns: the gateway follows a channel's
// live messages, and the server knows it, before the channel's adapter
// runs; it subscribed after starting the adapter, so progress of a turn
// the first event started could be published to nobody (a Slack test
// lost its first progress message under load).
func TestLiveFollowedBeforeTheAdapterRuns(t *testing.T) {
	for range 10 {
		srv := bustest.StartServer(t)
		b := srv.Connect(t, "", gateway.Assets)
		e := &eager{ran: make(chan bool, 1), interest: func() bool {
			return srv.NATSServer().GlobalAccount().SubscriptionInterest(b.Space.Live("eager", "c"))
		}}
		runGatewayOn(t, b, e)
		select {
		case followed := <-e.ran:
			if !followed {
				t.Fatal("the adapter ran before the gateway followed its live messages")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the adapter never ran")
		}
	}
}

// held is a live adapter whose live deliveries to chat "slow" wait until
// release is closed (a platform call that hangs), and that reports each
// delivery once made, as "chat:content" (live) or "reply chat:content".
type held struct {
	started   chan struct{}
	release   chan struct{}
	delivered chan string
	// liveStarted, when set, receives the content of each of chat
	// "slow"'s live messages as its delivery starts hanging.
	liveStarted chan string
}

func (h *held) Channel() string { return "held" }

func (h *held) Run(ctx context.Context, _ gateway.Inbox) error {
	close(h.started)
	<-ctx.Done()
	return nil
}

func (h *held) Deliver(_ context.Context, out *nanofleetv1.OutboundMessage) error {
	h.delivered <- "reply " + out.GetChatId() + ":" + out.GetContent()
	return nil
}

func (h *held) DeliverLive(ctx context.Context, out *nanofleetv1.OutboundMessage) error {
	if out.GetChatId() == "slow" {
		if h.liveStarted != nil {
			h.liveStarted <- out.GetContent()
		}
		select {
		case <-h.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	h.delivered <- out.GetChatId() + ":" + out.GetContent()
	return nil
}

// TestLiveChatsDoNotWaitForEachOther: a chat whose live delivery hangs
// holds only its own live messages, which then come in order, the oldest
// dropped past the 32 a chat keeps waiting; the channel's callback
// delivered them one at a time, so one slow platform call held every
// chat's progress.
func TestLiveChatsDoNotWaitForEachOther(t *testing.T) {
	b := bustest.StartJetStream(t, gateway.Assets)
	h := &held{started: make(chan struct{}), release: make(chan struct{}), delivered: make(chan string, 64)}
	runGatewayOn(t, b, h)
	bustest.Receive(t, h.started, 10*time.Second)
	live := func(chat, content string) { publishLive(t, b, chat, content, progress) }
	for i := 1; i <= 40; i++ {
		live("slow", fmt.Sprint(i))
	}
	live("fast", "a")
	if got := bustest.Receive(t, h.delivered, 10*time.Second); got != "fast:a" {
		t.Fatalf("first delivery = %q, want fast:a while slow's hangs", got)
	}
	close(h.release)
	// 1 was under way; 2 to 8 were dropped for 34 to 40.
	want := []string{"slow:1"}
	for i := 9; i <= 40; i++ {
		want = append(want, fmt.Sprint("slow:", i))
	}
	for _, w := range want {
		if got := bustest.Receive(t, h.delivered, 10*time.Second); got != w {
			t.Fatalf("delivery = %q, want %q", got, w)
		}
	}
	select {
	case got := <-h.delivered:
		t.Errorf("delivered %q after slow:40", got)
	default: // every delivery of the published messages has been received
	}
}

const (
	progress = nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS
	delta    = nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA
)

func publishLive(t *testing.T, b *bus.Bus, chat, content string, kind nanofleetv1.OutboundKind) {
	t.Helper()
	data, _ := proto.Marshal(&nanofleetv1.OutboundMessage{Channel: "held", ChatId: chat, Content: content, Kind: kind})
	if err := b.NC.Publish(b.Space.Live("held", chat), data); err != nil {
		t.Fatal(err)
	}
}

// TestLiveDeltasWaitingCoalesce: deltas waiting behind a chat's slow
// delivery are kept as the latest one between the other live messages,
// so that a streamed answer's deltas cannot push its tool hints out.
func TestLiveDeltasWaitingCoalesce(t *testing.T) {
	b := bustest.StartJetStream(t, gateway.Assets)
	h := &held{started: make(chan struct{}), release: make(chan struct{}), delivered: make(chan string, 64)}
	runGatewayOn(t, b, h)
	bustest.Receive(t, h.started, 10*time.Second)
	publishLive(t, b, "slow", "1", progress)
	for _, d := range []string{"d1", "d2", "d3"} {
		publishLive(t, b, "slow", d, delta)
	}
	publishLive(t, b, "slow", "p", progress)
	for _, d := range []string{"d4", "d5"} {
		publishLive(t, b, "slow", d, delta)
	}
	publishLive(t, b, "fast", "a", progress) // after slow's, so all of them are queued once it comes
	if got := bustest.Receive(t, h.delivered, 10*time.Second); got != "fast:a" {
		t.Fatalf("first delivery = %q, want fast:a while slow's hangs", got)
	}
	close(h.release)
	for _, want := range []string{"slow:1", "slow:d3", "slow:p", "slow:d5"} {
		if got := bustest.Receive(t, h.delivered, 10*time.Second); got != want {
			t.Fatalf("delivery = %q, want %q", got, want)
		}
	}
}

// TestToolHintsNeverFollowTheirAnswer: a turn's last reply waits for the
// turn's tool hint under way on the platform, and the turn's hints that
// wait behind it or come later are dropped. The live messages and the
// replies went their own ways, so a hint could be shown after the answer.
func TestToolHintsNeverFollowTheirAnswer(t *testing.T) {
	b := bustest.StartJetStream(t, gateway.Assets)
	h := &held{started: make(chan struct{}), release: make(chan struct{}), delivered: make(chan string, 16), liveStarted: make(chan string, 16)}
	runGatewayOn(t, b, h)
	bustest.Receive(t, h.started, 10*time.Second)
	hint := func(turn, text string) {
		t.Helper()
		data, _ := proto.Marshal(&nanofleetv1.OutboundMessage{Channel: "held", ChatId: "slow", TurnId: turn, Content: text, Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT})
		if err := b.NC.Publish(b.Space.Live("held", "slow"), data); err != nil {
			t.Fatal(err)
		}
		if err := b.NC.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	hint("t1", "hint 1") // hangs on the platform until release
	// The answer must come while hint 1 is under way, not before it
	// reached the platform: hints and replies reach the gateway apart.
	if got := bustest.Receive(t, h.liveStarted, 10*time.Second); got != "hint 1" {
		t.Fatalf("delivery started for %q, want hint 1", got)
	}
	hint("t1", "hint 2")
	data, _ := proto.Marshal(&nanofleetv1.OutboundMessage{Id: "r1", Channel: "held", ChatId: "slow", TurnId: "t1", Content: "answer", Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, LastOfTurn: true})
	if _, err := b.JS.Publish(t.Context(), b.Space.Outbound("held", "slow"), data); err != nil {
		t.Fatal(err)
	}
	// The answer waits (up to 5 s) while hint 1 is on its way.
	select {
	case got := <-h.delivered:
		t.Fatalf("delivered %q while the turn's hint was under way", got)
	case <-time.After(time.Second):
	}
	close(h.release)
	for _, want := range []string{"slow:hint 1", "reply slow:answer"} {
		if got := bustest.Receive(t, h.delivered, 10*time.Second); got != want {
			t.Fatalf("delivered %q, want %q", got, want)
		}
	}
	hint("t1", "hint 3")
	hint("t2", "next turn")
	if got := bustest.Receive(t, h.delivered, 10*time.Second); got != "slow:next turn" {
		t.Errorf("delivered %q, want the next turn's hint (the ended turn's dropped)", got)
	}
}
