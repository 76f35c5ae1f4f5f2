package editstream_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/editstream"
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
	edits     int
	seen      chan op
}

func newPlatform() *platform { return &platform{failAfter: -1, seen: make(chan op, 1000)} }

func (p *platform) Post(_ context.Context, _ *nanofleetv1.OutboundMessage, text string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	o := op{kind: "post", id: "m1", text: text, at: time.Now()}
	p.ops = append(p.ops, o)
	p.seen <- o
	if p.failPost {
		return "", errors.New("post refused")
	}
	return "m1", nil
}

func (p *platform) Edit(_ context.Context, _ *nanofleetv1.OutboundMessage, id, text string, final bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	o := op{kind: "edit", id: id, text: text, final: final, at: time.Now()}
	p.ops = append(p.ops, o)
	p.seen <- o
	p.edits++
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

func delta(text string) *nanofleetv1.OutboundMessage {
	return &nanofleetv1.OutboundMessage{Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA, ChatId: "c", ReplyTo: "in1", Content: text}
}

func final(text string) *nanofleetv1.OutboundMessage {
	return &nanofleetv1.OutboundMessage{Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, ChatId: "c", ReplyTo: "in1", Content: text}
}

// feed sends n word deltas every gap and returns the whole text.
func feed(t *testing.T, s *editstream.Streams, n int, gap time.Duration) string {
	t.Helper()
	var all strings.Builder
	for i := range n {
		w := "w" + string(rune('a'+i%26)) + " "
		all.WriteString(w)
		s.Delta(t.Context(), delta(w))
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
		deltas    int
		finished  bool // Finish reports the answer delivered
	}{
		{"edits", -1, false, 20, true},
		{"edit fails midway", 1, false, 20, false},
		{"final edit fails", 1000, false, 20, true},
		{"post fails", -1, true, 20, false},
		{"no deltas", -1, false, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPlatform()
			p.failAfter, p.failPost = tt.failAfter, tt.failPost
			s := editstream.New(p, interval, 4000, slog.New(slog.DiscardHandler))
			start := time.Now()
			text := feed(t, s, tt.deltas, 10*time.Millisecond)
			answer := text + " and the end."
			if tt.name == "final edit fails" {
				p.mu.Lock()
				p.failAfter = p.edits // the next edit, the final one, fails
				p.mu.Unlock()
				tt.finished = false
			}
			got := s.Finish(t.Context(), final(answer), answer)
			if got != tt.finished {
				t.Fatalf("Finish = %v, want %v", got, tt.finished)
			}
			ops := p.all()
			if tt.deltas == 0 {
				if len(ops) != 0 {
					t.Fatalf("ops without deltas: %v", ops)
				}
				return
			}
			if ops[0].kind != "post" || ops[0].at.Sub(start) > interval/2 {
				t.Errorf("first op %s after %s, want a post at once", ops[0].kind, ops[0].at.Sub(start))
			}
			for i := 1; i < len(ops); i++ {
				if d := ops[i].at.Sub(ops[i-1].at); d < interval {
					t.Errorf("ops %d and %d %s apart, under the interval %s", i-1, i, d, interval)
				}
			}
			last := ops[len(ops)-1]
			if tt.finished && (last.text != answer || !last.final) {
				t.Errorf("last op %+v, want the final answer", last)
			}
			if tt.failPost && len(ops) != 1 {
				t.Errorf("after a failed post: %v", ops)
			}
			if tt.name == "edit fails midway" && len(ops) != 3 { // post, edit, failed edit
				t.Errorf("ops after a failed edit: %d, want none after it", len(ops))
			}
		})
	}
}

func TestLateDeltasAreDropped(t *testing.T) {
	p := newPlatform()
	s := editstream.New(p, 50*time.Millisecond, 4000, slog.New(slog.DiscardHandler))
	s.Delta(t.Context(), delta("hello"))
	p.next(t)
	if !s.Finish(t.Context(), final("hello world"), "hello world") {
		t.Fatal("Finish = false")
	}
	s.Delta(t.Context(), delta(" late"))
	// A final answer without a stream, then its deltas: nothing shown.
	other := final("x")
	other.ReplyTo = "in2"
	if s.Finish(t.Context(), other, "x") {
		t.Error("Finish without a stream = true")
	}
	d := delta("y")
	d.ReplyTo = "in2"
	s.Delta(t.Context(), d)
	if o := p.next(t); o.text != "hello world" {
		t.Fatalf("op %+v, want the final edit", o)
	}
	select {
	case o := <-p.seen:
		t.Errorf("op after the final answer: %+v", o)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestUnchangedFinalNeedsNoEdit(t *testing.T) {
	p := newPlatform()
	s := editstream.New(p, 10*time.Millisecond, 4000, slog.New(slog.DiscardHandler))
	s.Delta(t.Context(), delta("all of it"))
	p.next(t)
	if !s.Finish(t.Context(), final("all of it"), "all of it") {
		t.Fatal("Finish = false")
	}
	if ops := p.all(); len(ops) != 1 {
		t.Errorf("ops = %v, want the post only", ops)
	}
}

func TestLongPartialTextIsCut(t *testing.T) {
	p := newPlatform()
	s := editstream.New(p, 10*time.Millisecond, 50, slog.New(slog.DiscardHandler))
	s.Delta(t.Context(), delta(strings.Repeat("é", 80)))
	o := p.next(t)
	if n := len([]rune(o.text)); n != 50 || !strings.HasSuffix(o.text, "…") {
		t.Errorf("posted %d runes: %q", n, o.text)
	}
}
