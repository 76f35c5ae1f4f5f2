package editstream_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adaptertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/editstream"
	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

// op is one post or edit the platform saw.
type op struct {
	kind, id, text string
	final          bool
	at             time.Time
}

// platform records posts and edits; edits fail after failAfter of them
// (never when negative), posts fail when failPost is set.
type platform struct {
	mu        sync.Mutex
	ops       []op
	failAfter int
	failPost  bool
	limited   int           // edits answered with a rate limit, from the first
	wait      time.Duration // the rate limit's wait
	edits     int
	seen      chan op
	now       func() time.Time // what ops are stamped with
}

func newPlatform() *platform {
	return &platform{failAfter: -1, seen: make(chan op, 1000), now: time.Now}
}

func (p *platform) Post(_ context.Context, _ *nanofleetv1.OutboundMessage, text string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	o := op{kind: "post", id: "m1", text: text, at: p.now()}
	p.ops = append(p.ops, o)
	p.seen <- o
	if p.failPost {
		return "", errors.New("post refused")
	}
	return "m1", nil
}

func (p *platform) Delete(_ context.Context, _ *nanofleetv1.OutboundMessage, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	o := op{kind: "delete", id: id, at: p.now()}
	p.ops = append(p.ops, o)
	p.seen <- o
	return nil
}

func (p *platform) Edit(_ context.Context, _ *nanofleetv1.OutboundMessage, id, text string, final bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	o := op{kind: "edit", id: id, text: text, final: final, at: p.now()}
	p.ops = append(p.ops, o)
	p.seen <- o
	p.edits++
	if p.edits <= p.limited {
		return gateway.Retry(errors.New("429 Too Many Requests"), p.wait)
	}
	if p.failAfter >= 0 && p.edits > p.failAfter {
		return errors.New("edit refused")
	}
	return nil
}

// next waits for the next op.
func (p *platform) next(t *testing.T) op {
	t.Helper()
	select {
	case o := <-p.seen:
		return o
	case <-time.After(5 * time.Second):
		t.Fatal("no post or edit within 5s")
		return op{}
	}
}

func (p *platform) all() []op {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]op(nil), p.ops...)
}

const channel = "test"

// harness is one gateway's streams on a real bus, with a recording
// platform.
type harness struct {
	p *platform
	s *editstream.Streams
	b *bus.Bus
}

func startStreams(t *testing.T, b *bus.Bus, interval time.Duration, limit int) *harness {
	t.Helper()
	return startStreamsWith(t, b, editstream.Config{Channel: channel, Interval: interval, Limit: limit}, nil)
}

// startPaced is startStreams on a fake clock that the platform stamps its
// ops with: the stamps are apart by the waits the streams made between
// the ops, however loaded the machine.
func startPaced(t *testing.T, b *bus.Bus, interval time.Duration, limit int) *harness {
	t.Helper()
	return startStreamsWith(t, b, editstream.Config{Channel: channel, Interval: interval, Limit: limit}, adaptertest.NewClock())
}

// startStreamsWith is startStreams for any config, paced by clock (nil:
// the system's).
func startStreamsWith(t *testing.T, b *bus.Bus, cfg editstream.Config, clock editstream.Clock) *harness {
	t.Helper()
	p := newPlatform()
	if clock != nil {
		p.now = clock.Now
	}
	s, err := editstream.New(t.Context(), cfg, b, p, editstream.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	stop, err := s.Watch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if err := b.NC.Flush(); err != nil { // the subscriptions are in place
		t.Fatal(err)
	}
	return &harness{p: p, s: s, b: b}
}

func publish(t *testing.T, b *bus.Bus, subj string, m *nanofleetv1.OutboundMessage) {
	t.Helper()
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.NC.Publish(subj, data); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) delta(t *testing.T, text string) {
	t.Helper()
	h.deltaOf(t, "in1", text)
}

// deltaOf publishes a delta of the turn answering turn.
func (h *harness) deltaOf(t *testing.T, turn, text string) {
	t.Helper()
	publish(t, h.b, h.b.Space.Live(channel, "c"), &nanofleetv1.OutboundMessage{Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA, ChatId: "c", ReplyTo: turn, Content: text})
}

// streamsOnly fails the test unless turn is the one turn streaming. Called
// once turn's stream has posted, it proves that the deltas published
// before turn's, which the streams handled first, started none: a
// stream's posts come from a goroutine of its own, so their absence
// within some time would prove nothing.
func (h *harness) streamsOnly(t *testing.T, turn string) {
	t.Helper()
	if got := h.s.LiveTurns(); !slices.Equal(got, []string{turn}) {
		t.Errorf("turns streaming %q, want only %q", got, turn)
	}
}

// final publishes the final answer as the worker does and returns it.
func (h *harness) final(t *testing.T, text string) *nanofleetv1.OutboundMessage {
	t.Helper()
	m := &nanofleetv1.OutboundMessage{Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, ChatId: "c", ReplyTo: "in1", Content: text}
	publish(t, h.b, h.b.Space.Outbound(channel, "c"), m)
	return m
}

// finishes publishes the final answer text and fails the test unless
// Finish reports the stream delivered it.
func (h *harness) finishes(t *testing.T, text string) {
	t.Helper()
	if !h.s.Finish(t.Context(), h.final(t, text)) {
		t.Fatalf("Finish(%.30q…) = false, want the stream to have delivered it", text)
	}
}

// feed sends n word deltas every gap and returns the whole text.
func (h *harness) feed(t *testing.T, n int, gap time.Duration) string {
	t.Helper()
	var all strings.Builder
	for i := range n {
		w := "w" + string(rune('a'+i%26)) + " "
		all.WriteString(w)
		h.delta(t, w)
		time.Sleep(gap) // pacing the input, as a model does
	}
	return strings.TrimSpace(all.String())
}

func TestStreams(t *testing.T) {
	const interval = 100 * time.Millisecond
	tests := []struct {
		name      string
		failAfter int  // edits before they fail; -1 never
		failPost  bool // the first post fails
		failFinal bool // the final edit fails
		deltas    int
		finished  bool // Finish reports the answer delivered
		wantOps   int  // posts and edits, when known
	}{
		{"edits", -1, false, false, 20, true, 0},
		{"edit fails midway", 1, false, false, 20, false, 4}, // post, edit, failed edit, delete
		{"final edit fails", -1, false, true, 20, false, 0},
		{"post fails", -1, true, false, 20, false, 1},
		{"no deltas", -1, false, false, 0, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startPaced(t, bustest.StartJetStream(t, editstream.Assets), interval, 4000)
			h.p.failAfter, h.p.failPost = tt.failAfter, tt.failPost
			var text string
			if tt.deltas > 0 {
				// The first delta posts at once: the post comes before any
				// other delta or the final answer is published.
				h.delta(t, "first ")
				if o := h.p.next(t); o.kind != "post" || o.text != "first" {
					t.Fatalf("first op %+v after the first delta, want it posted before any other", o)
				}
				text = "first " + h.feed(t, tt.deltas-1, 10*time.Millisecond)
			}
			answer := text + " and the end."
			if tt.failFinal {
				h.p.mu.Lock()
				h.p.failAfter = h.p.edits // the next edit, the final one, fails
				h.p.mu.Unlock()
			}
			m := h.final(t, answer)
			if got := h.s.Finish(t.Context(), m); got != tt.finished {
				t.Fatalf("Finish = %v, want %v", got, tt.finished)
			}
			ops := h.p.all()
			if tt.deltas == 0 {
				if len(ops) != 0 {
					t.Fatalf("ops without deltas: %v", ops)
				}
				return
			}
			if ops[0].kind != "post" {
				t.Errorf("first op %+v, want a post", ops[0])
			}
			if last := ops[len(ops)-1]; !tt.finished && !tt.failPost && last.kind != "delete" {
				t.Errorf("last op %+v, want the partial message deleted", last)
			}
			for i := 1; i < len(ops); i++ {
				if ops[i].kind == "delete" {
					continue
				}
				if d := ops[i].at.Sub(ops[i-1].at); d < interval {
					t.Errorf("ops %d and %d %s apart, under the interval %s", i-1, i, d, interval)
				}
			}
			last := ops[len(ops)-1]
			if tt.finished && (last.text != answer || !last.final) {
				t.Errorf("last op %+v, want the final answer", last)
			}
			if tt.wantOps != 0 && len(ops) != tt.wantOps {
				t.Errorf("%d ops, want %d: %v", len(ops), tt.wantOps, ops)
			}
		})
	}
}

// TestTwoGateways: both gateways see the deltas, one posts and edits, and
// the other, delivering the final reply, learns that the final edit
// delivered it.
func TestTwoGateways(t *testing.T) {
	srv := bustest.StartServer(t)
	g1 := startStreams(t, srv.Connect(t, "", editstream.Assets), 50*time.Millisecond, 4000)
	g2 := startStreams(t, srv.Connect(t, "", editstream.Assets), 50*time.Millisecond, 4000)
	text := g1.feed(t, 10, 10*time.Millisecond)
	m := g1.final(t, text)
	for i, g := range []*harness{g1, g2} {
		if !g.s.Finish(t.Context(), m) {
			t.Errorf("gateway %d: Finish = false", i+1)
		}
	}
	ops1, ops2 := g1.p.all(), g2.p.all()
	if (len(ops1) == 0) == (len(ops2) == 0) {
		t.Fatalf("gateway 1 made %d ops, gateway 2 %d; want one of them to stream", len(ops1), len(ops2))
	}
	ops := append(ops1, ops2...)
	posts := 0
	for _, o := range ops {
		if o.kind == "post" {
			posts++
		}
	}
	if posts != 1 || ops[len(ops)-1].text != text {
		t.Errorf("ops = %v, want one post and the answer last", ops)
	}
}

func TestLateDeltasAreDropped(t *testing.T) {
	h := startStreams(t, bustest.StartJetStream(t, editstream.Assets), 50*time.Millisecond, 4000)
	h.delta(t, "hello")
	h.p.next(t)
	h.finishes(t, "hello world")
	if o := h.p.next(t); o.text != "hello world" {
		t.Fatalf("op %+v, want the final edit", o)
	}
	h.delta(t, " late")
	// A final answer without a stream, then its deltas: nothing shown.
	other := &nanofleetv1.OutboundMessage{Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, ChatId: "c", ReplyTo: "in2", Content: "x"}
	publish(t, h.b, h.b.Space.Outbound(channel, "c"), other)
	if h.s.Finish(t.Context(), other) {
		t.Error("Finish without a stream = true")
	}
	h.deltaOf(t, "in2", "y")
	// A turn still running is streamed, after all of the above.
	h.deltaOf(t, "in3", "running")
	if o := h.p.next(t); o.kind != "post" || o.text != "running" {
		t.Fatalf("op %+v after the final answers, want the running turn's post", o)
	}
	h.streamsOnly(t, "in3")
}

// TestDeltasBehindTheirFinalAreDropped: a burst of turns, each ended by
// its final answer and then sent one more delta, starts no stream: the
// final is handled before the delta that followed it on the wire.
func TestDeltasBehindTheirFinalAreDropped(t *testing.T) {
	h := startStreams(t, bustest.StartJetStream(t, editstream.Assets), 10*time.Millisecond, 4000)
	const turns = 300
	for i := range turns {
		id := fmt.Sprintf("ended%d", i)
		for _, m := range []struct {
			subj string
			kind nanofleetv1.OutboundKind
		}{
			{h.b.Space.Outbound(channel, "c"), nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL},
			{h.b.Space.Live(channel, "c"), nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA},
		} {
			data, err := proto.Marshal(&nanofleetv1.OutboundMessage{Kind: m.kind, ChatId: "c", ReplyTo: id, Content: "x"})
			if err != nil {
				t.Fatal(err)
			}
			if err := h.b.NC.Publish(m.subj, data); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A turn that is still running is streamed, after all of the above.
	h.delta(t, "running")
	if o := h.p.next(t); o.text != "running" {
		t.Fatalf("op %+v, want the running turn's post", o)
	}
	h.streamsOnly(t, "in1")
}

func TestUnchangedFinalNeedsNoEdit(t *testing.T) {
	h := startStreams(t, bustest.StartJetStream(t, editstream.Assets), 10*time.Millisecond, 4000)
	h.delta(t, "all of it")
	h.p.next(t)
	h.finishes(t, "all of it")
	if ops := h.p.all(); len(ops) != 1 {
		t.Errorf("ops = %v, want the post only", ops)
	}
}

func TestLongPartialTextIsCut(t *testing.T) {
	h := startStreams(t, bustest.StartJetStream(t, editstream.Assets), 10*time.Millisecond, 50)
	h.delta(t, strings.Repeat("é", 80))
	o := h.p.next(t)
	if n := len([]rune(o.text)); n != 50 || !strings.HasSuffix(o.text, "…") {
		t.Errorf("posted %d runes: %q", n, o.text)
	}
}

// TestRenderedSizeIsCut: with a Size, partial texts are cut until they
// measure within Most, and the final edit carries the first piece of
// markup.SplitRendered, as the adapter splits.
func TestRenderedSizeIsCut(t *testing.T) {
	// Rendering that triples the text, as escaping can.
	size := func(md string) int { return 3 * markup.Len(md) }
	const limit, most = 50, 60
	h := startStreamsWith(t, bustest.StartJetStream(t, editstream.Assets), editstream.Config{Channel: channel, Interval: 10 * time.Millisecond, Limit: limit, Size: size, Most: most}, nil)
	h.delta(t, strings.Repeat("é", 40))
	if o := h.p.next(t); size(o.text) > most || !strings.HasSuffix(o.text, "…") {
		t.Errorf("posted %q, of size %d (most %d)", o.text, size(o.text), most)
	}
	answer := strings.Repeat("é", 40) + "\n\n" + strings.Repeat("a", 10)
	h.finishes(t, answer)
	ops := h.p.all()
	if last, want := ops[len(ops)-1], markup.SplitRendered(answer, limit, most, size)[0]; !last.final || last.text != want {
		t.Errorf("final edit %+v, want %q", last, want)
	}
}

// TestRateLimitedEditsWait: edits answered with a rate limit are tried
// again after the platform's wait; the stream does not fail.
func TestRateLimitedEditsWait(t *testing.T) {
	const wait = 300 * time.Millisecond
	for _, limited := range []int{1, 3} {
		t.Run(fmt.Sprint(limited, " limited"), func(t *testing.T) {
			h := startPaced(t, bustest.StartJetStream(t, editstream.Assets), 50*time.Millisecond, 4000)
			h.p.limited, h.p.wait = limited, wait
			text := h.feed(t, 10, 20*time.Millisecond)
			h.finishes(t, text+" end") // the final edit, after the waits
			ops := h.p.all()
			for i := 1; i < len(ops); i++ {
				if ops[i-1].kind == "edit" && i-1 < limited+1 && ops[i].at.Sub(ops[i-1].at) < wait {
					t.Errorf("op %d came %s after a rate limit of %s", i, ops[i].at.Sub(ops[i-1].at), wait)
				}
			}
			if last := ops[len(ops)-1]; last.text != text+" end" || !last.final {
				t.Errorf("last op %+v", last)
			}
		})
	}
}

// An adapter with streaming off holds a nil *Streams and watches it like
// a real one.
func TestNilStreamsWatchNothing(t *testing.T) {
	var s *editstream.Streams
	stop, err := s.Watch(t.Context())
	if err != nil {
		t.Fatalf("Watch on nil Streams: %v", err)
	}
	if stop == nil {
		t.Fatal("Watch on nil Streams returned no stop function")
	}
	stop()
}

// TestReplyBeforeItsStream: the durable reply of a streamed answer can
// reach a gateway before the turn's deltas or stream entry do (a loaded
// gateway); marked streamed by the worker, it waits for the stream's
// owner instead of being posted a second time. The waiting gateway here
// follows no deltas, so the entry is the only word it gets.
func TestReplyBeforeItsStream(t *testing.T) {
	srv := bustest.StartServer(t)
	owner := startStreams(t, srv.Connect(t, "", editstream.Assets), 50*time.Millisecond, 4000)
	late, err := editstream.New(t.Context(), editstream.Config{Channel: channel, Interval: 50 * time.Millisecond, Limit: 4000}, srv.Connect(t, "", editstream.Assets), newPlatform())
	if err != nil {
		t.Fatal(err)
	}
	m := &nanofleetv1.OutboundMessage{Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, ChatId: "c", ReplyTo: "in1",
		Content: "wa wb wc", Metadata: map[string]string{"streamed": "true"}}
	finished := make(chan bool, 1)
	go func() { finished <- late.Finish(t.Context(), m) }()
	if text := owner.feed(t, 3, 10*time.Millisecond); text != m.GetContent() {
		t.Fatalf("fed %q", text)
	}
	publish(t, owner.b, owner.b.Space.Outbound(channel, "c"), m)
	select {
	case ok := <-finished:
		if !ok {
			t.Fatal("Finish = false: the streamed answer would be posted again")
		}
	case <-time.After(time.Minute):
		t.Fatal("Finish did not return")
	}
	posts := 0
	for _, o := range owner.p.all() {
		if o.kind == "post" {
			posts++
		}
	}
	if posts != 1 {
		t.Errorf("%d posts, want the one stream message", posts)
	}
}
