package gateway_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// recorder is an adapter whose platform is a slice: it fails as scripted
// and reports each delivery on a channel.
type recorder struct {
	mu        sync.Mutex
	failures  map[string][]error
	delivered chan *nanofleetv1.OutboundMessage
	attempts  chan string
}

func newRecorder() *recorder {
	return &recorder{failures: map[string][]error{}, delivered: make(chan *nanofleetv1.OutboundMessage, 100), attempts: make(chan string, 100)}
}

func (r *recorder) Channel() string { return "test" }

func (r *recorder) Run(ctx context.Context, in gateway.Inbox) error {
	<-ctx.Done()
	return nil
}

func (r *recorder) Deliver(ctx context.Context, m *nanofleetv1.OutboundMessage) error {
	r.attempts <- m.GetId()
	r.mu.Lock()
	var err error
	if fs := r.failures[m.GetId()]; len(fs) > 0 {
		err, r.failures[m.GetId()] = fs[0], fs[1:]
	}
	r.mu.Unlock()
	if err != nil {
		return err
	}
	r.delivered <- m
	return nil
}

func startGateway(t *testing.T, a gateway.Adapter) *bus.Bus {
	t.Helper()
	b := bustest.StartJetStream(t, gateway.Assets)
	runGatewayOn(t, b, a)
	return b
}

// newPublisher makes a gateway on b with no adapters, for what it
// stores (Publish), not what it delivers.
func newPublisher(t *testing.T, b *bus.Bus) *gateway.Gateway {
	t.Helper()
	g, err := gateway.New(gateway.DefaultConfig(), b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// runGatewayOn runs a gateway with a on b until the test ends.
func runGatewayOn(t *testing.T, b *bus.Bus, a gateway.Adapter) {
	t.Helper()
	cfg := gateway.DefaultConfig()
	cfg.MaxDeliver = 3
	cfg.MinBackoff = 10 * time.Millisecond
	runGatewayWith(t, b, cfg, []gateway.Adapter{a})
}

// runGatewayWith runs a gateway with cfg, adapters and opts on b until
// the test ends.
func runGatewayWith(t *testing.T, b *bus.Bus, cfg gateway.Config, adapters []gateway.Adapter, opts ...gateway.Option) {
	t.Helper()
	g, err := gateway.New(cfg, b, adapters, opts...)
	if err != nil {
		t.Fatal(err)
	}
	svctest.Run(t, g.Run)
}

func publishReply(t *testing.T, b *bus.Bus, id, text string) {
	t.Helper()
	out := &nanofleetv1.OutboundMessage{Id: id, Channel: "test", ChatId: "c1", Content: text, Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL}
	data, _ := proto.Marshal(out)
	if _, err := b.JS.Publish(t.Context(), b.Space.Outbound("test", "c1"), data); err != nil {
		t.Fatal(err)
	}
}

func expect(t *testing.T, ch <-chan *nanofleetv1.OutboundMessage, id string) {
	t.Helper()
	select {
	case m := <-ch:
		if m.GetId() != id {
			t.Fatalf("delivered %q, want %q", m.GetId(), id)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("reply %s never delivered", id)
	}
}

func TestDeliveryRetriesHonouringRetryAfter(t *testing.T) {
	r := newRecorder()
	r.failures["r1"] = []error{gateway.Retry(errors.New("429 too many requests"), 300*time.Millisecond)}
	b := startGateway(t, r)
	start := time.Now()
	publishReply(t, b, "r1", "hello")
	expect(t, r.delivered, "r1")
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("retried after %s, before the platform's retry-after of 300ms", waited)
	}
}

func TestPermanentFailureIsDeadLettered(t *testing.T) {
	r := newRecorder()
	r.failures["bad"] = []error{gateway.Permanent(errors.New("400 chat not found"))}
	b := startGateway(t, r)
	dlq := make(chan *nats.Msg, 1)
	sub, err := b.NC.ChanSubscribe(b.Space.DeadLetter("outbound"), dlq)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	publishReply(t, b, "bad", "x")
	publishReply(t, b, "good", "y")
	expect(t, r.delivered, "good")
	select {
	case m := <-dlq:
		dl := &nanofleetv1.DeadLetter{}
		if err := proto.Unmarshal(m.Data, dl); err != nil {
			t.Fatal(err)
		}
		if dl.Reason == "" || dl.Deliveries != 1 {
			t.Errorf("dead letter = %+v", dl)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no dead letter")
	}
}

func TestRetriesSpentGoToDeadLetter(t *testing.T) {
	r := newRecorder()
	boom := gateway.Retry(errors.New("502 bad gateway"), 0)
	r.failures["flaky"] = []error{boom, boom, boom, boom}
	b := startGateway(t, r)
	dlq := make(chan *nats.Msg, 1)
	sub, _ := b.NC.ChanSubscribe(b.Space.DeadLetter("outbound"), dlq)
	defer sub.Unsubscribe()
	publishReply(t, b, "flaky", "x")
	select {
	case m := <-dlq:
		if got := m.Header.Get("Nanofleet-Reason"); got == "" {
			t.Error("dead letter without reason")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no dead letter after spent retries")
	}
	if n := len(r.attempts); n != 3 {
		t.Errorf("%d attempts, want MaxDeliver = 3", n)
	}
}

// TestAttemptsWithoutAnswerGoToDeadLetter: a reply whose every attempt
// ended without the gateway deciding (it stopped or crashed during each)
// is dead-lettered with a reason at the next delivery, not dropped by the
// server once MaxDeliver deliveries are spent.
func TestAttemptsWithoutAnswerGoToDeadLetter(t *testing.T) {
	b := bustest.StartJetStream(t, gateway.Assets)
	r := newRecorder()
	// A first run makes the gateway's consumer of the channel's replies.
	g, err := gateway.New(gateway.DefaultConfig(), b, []gateway.Adapter{r})
	if err != nil {
		t.Fatal(err)
	}
	stop := svctest.Run(t, g.Run)
	bustest.Eventually(t, 10*time.Second, func() error {
		_, err := b.JS.Consumer(t.Context(), b.Space.OutboundStream(), b.Space.GatewayConsumer("test"))
		return err
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// Three deliveries that end without an answer, as when the process
	// that took each died.
	publishReply(t, b, "orphan", "x")
	cons, err := b.JS.Consumer(t.Context(), b.Space.OutboundStream(), b.Space.GatewayConsumer("test"))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		m := bustest.Receive(t, batch.Messages(), 10*time.Second)
		if err := m.Nak(); err != nil {
			t.Fatal(err)
		}
	}
	dlq := make(chan *nats.Msg, 1)
	sub, err := b.NC.ChanSubscribe(b.Space.DeadLetter("outbound"), dlq)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	runGatewayOn(t, b, r) // MaxDeliver 3
	m := bustest.Receive(t, dlq, 10*time.Second)
	if got := m.Header.Get("Nanofleet-Reason"); !strings.Contains(got, "ended without an answer") {
		t.Errorf("dead letter's reason %q", got)
	}
	if n := len(r.attempts); n != 0 {
		t.Errorf("%d attempts to deliver the orphan, want none after its three", n)
	}
}

func TestPublishDeduplicatesPlatformEvents(t *testing.T) {
	b := bustest.StartJetStream(t, gateway.Assets)
	g := newPublisher(t, b)
	ctx := t.Context()
	in := &nanofleetv1.InboundMessage{Id: "update-7", Channel: "telegram", ChatId: "42", Content: "hi"}
	for range 3 {
		if err := g.Publish(ctx, proto.Clone(in).(*nanofleetv1.InboundMessage)); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := b.JS.Stream(ctx, b.Space.InboundStream())
	info, _ := st.Info(ctx)
	if info.State.Msgs != 1 {
		t.Errorf("stored %d inbound messages for one event, want 1", info.State.Msgs)
	}
	if err := g.Publish(ctx, &nanofleetv1.InboundMessage{Channel: "telegram"}); err == nil {
		t.Error("message without id accepted")
	}
}

// TestStoreDuplicateAfterALostAck: a store whose first try was stored but
// whose ack was lost (its node shut down) is sent again and reported as
// stored, not as a duplicate: the API would have taken it for the same
// question asked again and started a second turn. A later store of the
// same message is a duplicate.
func TestStoreDuplicateAfterALostAck(t *testing.T) {
	b := bustest.StartJetStream(t, gateway.Assets)
	lossy := *b
	lossy.JS = &losesFirstAck{JetStream: b.JS}
	g, err := gateway.New(gateway.DefaultConfig(), &lossy, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	in := &nanofleetv1.InboundMessage{Id: "api-kq", Channel: "api", ChatId: "s1", Content: "hi"}
	for i, want := range []bool{false, true} {
		dup, err := g.Store(ctx, proto.Clone(in).(*nanofleetv1.InboundMessage))
		if err != nil {
			t.Fatalf("store %d: %v", i+1, err)
		}
		if dup != want {
			t.Errorf("store %d: duplicate = %v, want %v", i+1, dup, want)
		}
	}
	st, err := b.JS.Stream(ctx, b.Space.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("stored %d inbound messages, want 1", info.State.Msgs)
	}
}

// losesFirstAck is a JetStream whose first PublishMsg stores the message
// and never answers, as a publish whose node shut down before its ack.
type losesFirstAck struct {
	jetstream.JetStream
	once sync.Once
}

func (l *losesFirstAck) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	lose := false
	l.once.Do(func() { lose = true })
	ack, err := l.JetStream.PublishMsg(ctx, m, opts...)
	if !lose || err != nil {
		return ack, err
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// A platform may hand over bytes that are not UTF-8 (WhatsApp's proto2
// messages do); protobuf refuses to encode such strings, so before the
// fix the message was neither stored nor dead-lettered.
func TestStoreMakesStringsValidUTF8(t *testing.T) {
	b := bustest.StartJetStream(t, gateway.Assets)
	g := newPublisher(t, b)
	ctx := t.Context()
	in := &nanofleetv1.InboundMessage{
		Id: "m1", Channel: "whatsapp", ChatId: "15550001", SenderName: "Bob \xc3",
		Content:  "hello \xff\xfe world",
		Media:    []*nanofleetv1.MediaRef{{Object: "o1", Name: "r\xe9sum\xe9.pdf"}},
		Metadata: map[string]string{"quote\xff": "caf\xe9", "ok": "fine"},
	}
	if err := g.Publish(ctx, in); err != nil {
		t.Fatalf("publish: %v", err)
	}
	st, err := b.JS.Stream(ctx, b.Space.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.GetLastMsgForSubject(ctx, b.Space.Inbound("whatsapp", "15550001"))
	if err != nil {
		t.Fatalf("stored message: %v", err)
	}
	var got nanofleetv1.InboundMessage
	if err := proto.Unmarshal(raw.Data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"content":     "hello \uFFFD world",
		"sender_name": "Bob \uFFFD",
		"media name":  "r\uFFFDsum\uFFFD.pdf",
		"metadata":    "caf\uFFFD",
		"ok":          "fine",
	}
	gotFields := map[string]string{
		"content":     got.GetContent(),
		"sender_name": got.GetSenderName(),
		"media name":  got.GetMedia()[0].GetName(),
		"metadata":    got.GetMetadata()["quote\uFFFD"],
		"ok":          got.GetMetadata()["ok"],
	}
	for k, w := range want {
		if gotFields[k] != w {
			t.Errorf("%s = %q, want %q", k, gotFields[k], w)
		}
	}
}
