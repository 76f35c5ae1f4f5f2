package directget_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/directget"
)

// TestLastAndRange: the newest message on a subject comes back with its
// sequence, data and headers (the worker's FIFO guard compares replies by
// their Nats-Msg-Id); a subject with no message is not found; a range
// reads in order.
func TestLastAndRange(t *testing.T) {
	ctx := t.Context()
	b := bustest.StartJetStream(t)
	r := directget.NewReader(b.NC)
	stream, subj := b.Space.OutboundStream(), b.Space.Outbound("cli", "c")
	for _, id := range []string{"t1:0", "t2:0"} {
		m := nats.NewMsg(subj)
		m.Data = []byte("reply " + id)
		m.Header.Set(nats.MsgIdHdr, id)
		if _, err := b.JS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	m, ok, err := r.Last(ctx, stream, subj)
	if err != nil || !ok {
		t.Fatalf("Last: %v, found %v", err, ok)
	}
	if got := m.Header.Get(nats.MsgIdHdr); got != "t2:0" || string(m.Data) != "reply t2:0" || m.Seq == 0 {
		t.Errorf("Last = seq %d, id %q, data %q; want the second reply", m.Seq, got, m.Data)
	}
	if _, ok, err := r.Last(ctx, stream, b.Space.Outbound("cli", "other")); err != nil || ok {
		t.Errorf("Last of an empty subject: found %v, err %v", ok, err)
	}
	all, err := r.Range(ctx, stream, subj, 1, 0, 0)
	if err != nil || len(all) != 2 || all[0].Header.Get(nats.MsgIdHdr) != "t1:0" || all[1].Seq <= all[0].Seq {
		t.Errorf("Range = %+v, %v", all, err)
	}
	first, ok, err := r.LastUpTo(ctx, stream, subj, all[0].Seq)
	if err != nil || !ok || first.Seq != all[0].Seq {
		t.Errorf("LastUpTo(%d) = seq %d, found %v, err %v; want the first reply", all[0].Seq, first.Seq, ok, err)
	}
}

// TestNext: the first message on a subject from a sequence comes back
// with how many follow it; one deleted or purged is skipped; past the
// last, none is found.
func TestNext(t *testing.T) {
	ctx := t.Context()
	b := bustest.StartJetStream(t)
	r := directget.NewReader(b.NC)
	stream, subj, other := b.Space.OutboundStream(), b.Space.Outbound("cli", "n"), b.Space.Outbound("cli", "other")
	var seqs []uint64
	for i := range 4 {
		ack, err := b.JS.Publish(ctx, subj, []byte(fmt.Sprint("reply ", i)))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
		if _, err := b.JS.Publish(ctx, other, []byte("noise")); err != nil {
			t.Fatal(err)
		}
	}
	check := func(from, wantSeq, wantAfter uint64, wantFound bool) {
		t.Helper()
		m, after, found, err := r.Next(ctx, stream, subj, from)
		if err != nil || found != wantFound || (found && (m.Seq != wantSeq || after != wantAfter)) {
			t.Errorf("Next(%d) = seq %d, %d after, found %v, err %v; want seq %d, %d after, found %v",
				from, m.Seq, after, found, err, wantSeq, wantAfter, wantFound)
		}
	}
	check(seqs[0], seqs[0], 3, true)
	check(seqs[1], seqs[1], 2, true)
	check(seqs[1]+1, seqs[2], 1, true) // the other subject's message skipped
	check(seqs[3]+1, 0, 0, false)
	s, err := b.JS.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(subj), jetstream.WithPurgeKeep(2)); err != nil {
		t.Fatal(err)
	}
	check(seqs[0], seqs[2], 1, true) // the two oldest purged
}

// TestConcurrentReadsShareOneSubscription: many readers at once each get
// their own subject's messages, across pages, bounds and limits, and a
// request abandoned by its context leaves the Reader usable.
func TestConcurrentReadsShareOneSubscription(t *testing.T) {
	ctx := t.Context()
	b := bustest.StartJetStream(t)
	r := directget.NewReader(b.NC)
	stream := b.Space.OutboundStream()
	const chats, perChat = 8, 300 // more than one page of 256
	for i := range perChat {
		for c := range chats {
			if _, err := b.JS.Publish(ctx, b.Space.Outbound("cli", fmt.Sprint(c)), fmt.Appendf(nil, "%d/%d", c, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.Range(gone, stream, b.Space.Outbound("cli", "0"), 1, 0, 0); err == nil {
		t.Fatal("Range with a cancelled context succeeded")
	}

	tests := []struct {
		name     string
		from, to uint64
		max      int
		want     int
	}{
		{"all", 1, 0, 0, perChat},
		{"max", 1, 0, 10, 10},
		{"up to a sequence", 1, chats * 100, 0, 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var wg sync.WaitGroup
			errs := make(chan error, chats)
			for c := range chats {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					defer cancel()
					msgs, err := r.Range(rctx, stream, b.Space.Outbound("cli", fmt.Sprint(c)), tc.from, tc.to, tc.max)
					if err != nil {
						errs <- err
						return
					}
					if len(msgs) != tc.want {
						errs <- fmt.Errorf("chat %d: %d messages, want %d", c, len(msgs), tc.want)
						return
					}
					for i, m := range msgs {
						if want := fmt.Sprintf("%d/%d", c, i); string(m.Data) != want {
							errs <- fmt.Errorf("chat %d message %d = %q, want %q", c, i, m.Data, want)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// BenchmarkLast compares a read through the Reader's shared subscription
// with the subscription per read the package used before (what
// `SubscribeSync` costs: a SUB and UNSUB, and a 64K-slot channel).
func BenchmarkLast(b *testing.B) {
	ctx := b.Context()
	bb := bustest.StartJetStream(b)
	stream, subj := bb.Space.OutboundStream(), bb.Space.Outbound("cli", "c")
	if _, err := bb.JS.Publish(ctx, subj, []byte("reply")); err != nil {
		b.Fatal(err)
	}
	b.Run("reader", func(b *testing.B) {
		r := directget.NewReader(bb.NC)
		b.ReportAllocs()
		for b.Loop() {
			if _, ok, err := r.Last(ctx, stream, subj); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("subscription per read", func(b *testing.B) {
		req := []byte(`{"last_by_subj":"` + subj + `"}`)
		b.ReportAllocs()
		for b.Loop() {
			inbox := bb.NC.NewRespInbox()
			sub, err := bb.NC.SubscribeSync(inbox)
			if err != nil {
				b.Fatal(err)
			}
			if err := bb.NC.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, req); err != nil {
				b.Fatal(err)
			}
			if _, err := sub.NextMsgWithContext(ctx); err != nil {
				b.Fatal(err)
			}
			_ = sub.Unsubscribe()
		}
	})
}

// TestLostReplyFailsWithinTimeout: a request whose reply never comes (the
// server that took it died) fails by the Reader's timeout, under a context
// that would wait far longer, and the Reader goes on serving.
func TestLostReplyFailsWithinTimeout(t *testing.T) {
	b := bustest.StartJetStream(t)
	// Takes the requests for a stream JetStream does not have and never
	// answers: what a request sent to a server that then died looks like.
	bustest.Unanswered(t, b, "$JS.API.DIRECT.GET.LOST")
	const timeout = 200 * time.Millisecond
	r := directget.NewReader(b.NC, directget.WithTimeout(timeout))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, _, err := r.Last(ctx, "LOST", "x")
	if !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("Last on a lost reply: err %v, want a timeout", err)
	}
	// The Reader reports the caller's deadline as a timeout too: only a
	// caller's context still live shows that the Reader's own ended it.
	if ctx.Err() != nil {
		t.Fatalf("Last gave up at the caller's deadline, not after its own %s", timeout)
	}
	subj := b.Space.Outbound("cli", "c")
	if _, err := b.JS.Publish(ctx, subj, []byte("after")); err != nil {
		t.Fatal(err)
	}
	if m, ok, err := r.Last(ctx, b.Space.OutboundStream(), subj); err != nil || !ok || string(m.Data) != "after" {
		t.Errorf("Last after a timeout = %q, found %v, err %v", m.Data, ok, err)
	}
}

// TestScanStopsAtItsCallersError: Scan hands over a range across pages in
// order, as Range returns it, and an error from the callback ends the
// scan at once and comes back unwrapped.
func TestScanStopsAtItsCallersError(t *testing.T) {
	ctx := t.Context()
	b := bustest.StartJetStream(t)
	r := directget.NewReader(b.NC)
	stream, subj := b.Space.OutboundStream(), b.Space.Outbound("cli", "c")
	const n = 600 // more than two pages of 256
	for i := range n {
		if _, err := b.JS.Publish(ctx, subj, fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	errStop := errors.New("enough")
	tests := []struct {
		name    string
		stopAt  int // the callback fails on this message; -1 never
		wantN   int
		wantErr error
	}{
		{"whole range", -1, n, nil},
		{"stop on the first page", 10, 11, errStop},
		{"stop on the third page", 520, 521, errStop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			err := r.Scan(ctx, stream, subj, 1, 0, 0, func(m directget.Msg) error {
				got = append(got, string(m.Data))
				if len(got)-1 == tt.stopAt {
					return errStop
				}
				return nil
			})
			if err != tt.wantErr { // the callback's own error, not wrapped
				t.Errorf("Scan err = %v, want %v", err, tt.wantErr)
			}
			if len(got) != tt.wantN {
				t.Fatalf("Scan handed over %d messages, want %d", len(got), tt.wantN)
			}
			for i, d := range got {
				if d != fmt.Sprint(i) {
					t.Fatalf("message %d = %q, want %d", i, d, i)
				}
			}
		})
	}
}

// TestReadOutlivesAnAnswerLostWithTheConnection: a read on the way when
// the reader's connection drops (its node's graceful restart) is never
// answered; it failed after the reader's whole timeout and the turn
// behind it with it. It is sent again on the connection that comes back.
func TestReadOutlivesAnAnswerLostWithTheConnection(t *testing.T) {
	srv := bustest.StartServer(t)
	b := srv.Connect(t, "")
	stream, subj := b.Space.OutboundStream(), b.Space.Outbound("cli", "c")
	if _, err := b.JS.Publish(t.Context(), subj, []byte("reply")); err != nil {
		t.Fatal(err)
	}
	hop := bustest.NewProxy(t, srv.ClientURL())
	r := directget.NewReader(hop.Connect(t, srv.ClientURL()).NC)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var (
		m   directget.Msg
		ok  bool
		err error
	)
	hop.CutAt(ctx, t, "DIRECT.GET."+stream, func() { m, ok, err = r.Last(ctx, stream, subj) })
	if err != nil || !ok || string(m.Data) != "reply" {
		t.Fatalf("Last with its answer lost with the connection: %q, found %v, err %v", m.Data, ok, err)
	}
}
