package session_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

func openStore(t *testing.T) *session.Store {
	t.Helper()
	b := bustest.StartJetStream(t)
	s, err := session.Open(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func turn(id string, inboundSeq uint64, text string) *nanofleetv1.TurnRecord {
	return &nanofleetv1.TurnRecord{
		TurnId:     id,
		InboundSeq: inboundSeq,
		Messages:   []*nanofleetv1.ChatMessage{{Role: "user", Content: text}},
	}
}

func TestAppendAndLoad(t *testing.T) {
	ctx := t.Context()
	s := openStore(t)
	const key = "telegram:42.x y"

	h, err := s.LoadHistory(ctx, key, 0)
	if err != nil || len(h.Turns) != 0 || h.LastSeq != 0 {
		t.Fatalf("empty history = %+v, %v", h, err)
	}
	// More records than one batch page, interleaved with another session.
	var last, otherLast uint64
	for i := range 300 {
		seq, err := s.Append(ctx, key, turn(fmt.Sprint("t", i), uint64(i+1), fmt.Sprint("msg ", i)), last)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		last = seq
		if otherLast, err = s.Append(ctx, "other:1", turn(fmt.Sprint("o", i), 0, "noise"), otherLast); err != nil {
			t.Fatal(err)
		}
	}
	h, err = s.LoadHistory(ctx, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Turns) != 300 || h.LastSeq != last {
		t.Fatalf("loaded %d turns, last %d; want 300, %d", len(h.Turns), h.LastSeq, last)
	}
	for i, tr := range h.Turns {
		if want := fmt.Sprint("msg ", i); tr.Record.Messages[0].Content != want {
			t.Fatalf("turn %d = %q, want %q", i, tr.Record.Messages[0].Content, want)
		}
	}
	if h.Find(7) == nil || h.Find(7).TurnId != "t6" {
		t.Errorf("Find(7) = %v", h.Find(7))
	}

	// After a cursor only the newer turns load, and LastSeq is still true.
	cursor := h.Turns[249].Seq
	h2, err := s.LoadHistory(ctx, key, cursor)
	if err != nil || len(h2.Turns) != 50 || h2.LastSeq != last {
		t.Fatalf("after cursor: %d turns, last %d, %v", len(h2.Turns), h2.LastSeq, err)
	}
	h3, err := s.LoadHistory(ctx, key, last)
	if err != nil || len(h3.Turns) != 0 || h3.LastSeq != last {
		t.Fatalf("at end: %d turns, last %d, %v", len(h3.Turns), h3.LastSeq, err)
	}
}

func TestAppendConflict(t *testing.T) {
	ctx := t.Context()
	s := openStore(t)
	seq, err := s.Append(ctx, "cli:a", turn("t1", 1, "one"), 0)
	if err != nil {
		t.Fatal(err)
	}
	// A writer that did not see t1 must fail.
	if _, err := s.Append(ctx, "cli:a", turn("t2", 2, "two"), 0); !errors.Is(err, session.ErrConflict) {
		t.Fatalf("stale append: %v, want ErrConflict", err)
	}
	if _, err := s.Append(ctx, "cli:a", turn("t2", 2, "two"), seq); err != nil {
		t.Fatalf("append after t1: %v", err)
	}
}

func TestClearedHistoryStartsFresh(t *testing.T) {
	ctx := t.Context()
	s := openStore(t)
	var last uint64
	for i, rec := range []*nanofleetv1.TurnRecord{
		turn("a", 1, "old"),
		{TurnId: "reset", ClearsHistory: true},
		turn("b", 3, "new"),
	} {
		seq, err := s.Append(ctx, "cli:r", rec, last)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		last = seq
	}
	h, err := s.LoadHistory(ctx, "cli:r", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Turns) != 2 || h.Turns[1].Record.TurnId != "b" {
		t.Fatalf("turns after reset = %v", h.Turns)
	}
}

func TestInfoCompareAndSet(t *testing.T) {
	ctx := t.Context()
	s := openStore(t)
	info, rev, err := s.Info(ctx, "cli:i")
	if err != nil || rev != 0 {
		t.Fatalf("new session: rev %d, %v", rev, err)
	}
	info.Model = "m1"
	rev1, err := s.PutInfo(ctx, info, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutInfo(ctx, info, 0); !errors.Is(err, session.ErrConflict) {
		t.Errorf("second create: %v, want ErrConflict", err)
	}
	got, err := s.UpdateInfo(ctx, "cli:i", func(i *nanofleetv1.SessionInfo) { i.ConsolidatedSeq = 9 })
	if err != nil || got.Model != "m1" || got.ConsolidatedSeq != 9 {
		t.Fatalf("UpdateInfo = %v, %v", got, err)
	}
	if _, err := s.PutInfo(ctx, info, rev1); !errors.Is(err, session.ErrConflict) {
		t.Errorf("stale update: %v, want ErrConflict", err)
	}
}

func TestCheckpoint(t *testing.T) {
	ctx := t.Context()
	s := openStore(t)
	if _, _, err := s.Checkpoint(ctx, "cli:c"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("missing checkpoint: %v", err)
	}
	cp := &nanofleetv1.TurnCheckpoint{TurnId: "t", InboundSeq: 5, Iteration: 2}
	rev, err := s.SaveCheckpoint(ctx, "cli:c", cp)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := s.Checkpoint(ctx, "cli:c")
	if err != nil || got.InboundSeq != 5 || got.Iteration != 2 {
		t.Fatalf("checkpoint = %v, %v", got, err)
	}
	if err := s.ClearCheckpoint(ctx, "cli:c", rev); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Checkpoint(ctx, "cli:c"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("cleared checkpoint: %v", err)
	}
	if err := s.ClearCheckpoint(ctx, "cli:c", rev); err != nil {
		t.Fatalf("clearing a cleared checkpoint: %v", err)
	}

	// The next turn saved its checkpoint before the previous turn's late
	// clear arrived: the clear leaves it alone.
	old, err := s.SaveCheckpoint(ctx, "cli:c", &nanofleetv1.TurnCheckpoint{TurnId: "t1", InboundSeq: 6})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveCheckpoint(ctx, "cli:c", &nanofleetv1.TurnCheckpoint{TurnId: "t2", InboundSeq: 7}); err != nil {
		t.Fatal(err)
	}
	if err := s.ClearCheckpoint(ctx, "cli:c", old); err != nil {
		t.Fatalf("late clear: %v", err)
	}
	if got, _, err := s.Checkpoint(ctx, "cli:c"); err != nil || got.GetTurnId() != "t2" {
		t.Fatalf("after a late clear: %v, %v; want the next turn's checkpoint", got, err)
	}
}

// TestClearedCheckpointLeavesNothing: a cleared checkpoint's marker
// expires, so a session that ran a turn keeps no entry in the checkpoint
// bucket (10,000 idle sessions must not hold 10,000 markers).
func TestClearedCheckpointLeavesNothing(t *testing.T) {
	ctx := t.Context()
	b := bustest.StartJetStream(t)
	s, err := session.Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := s.SaveCheckpoint(ctx, "cli:c", &nanofleetv1.TurnCheckpoint{TurnId: "t", InboundSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ClearCheckpoint(ctx, "cli:c", rev); err != nil {
		t.Fatal(err)
	}
	stream, err := b.JS.Stream(ctx, "KV_"+b.Space.Bucket(bus.BucketCheckpoints))
	if err != nil {
		t.Fatal(err)
	}
	if !stream.CachedInfo().Config.AllowMsgTTL {
		t.Fatal("checkpoint bucket does not allow per-message TTLs")
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.NumSubjects; n != 1 {
		t.Fatalf("right after the clear: %d subjects, want the marker's 1", n)
	}
	bustest.WaitSubjects(t, stream, 0, 10*time.Second) // the test layout's TTL is 1 s
	if _, _, err := s.Checkpoint(ctx, "cli:c"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("checkpoint after the marker expired: %v, want ErrNotFound", err)
	}
}

// TestReadsOutliveAnAnswerLostWithTheConnection: a turn's reads of the
// session's metadata and checkpoint, on the way when the worker's
// connection drops (its node shuts down), are never answered; each
// waited out its whole bound (10 s) and failed the turn. They must be
// asked again on the connection that comes back.
func TestReadsOutliveAnAnswerLostWithTheConnection(t *testing.T) {
	srv := bustest.StartServer(t)
	direct := srv.Connect(t, "")
	hop := bustest.NewProxy(t, srv.ClientURL())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	writer, err := session.Open(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.PutInfo(ctx, &nanofleetv1.SessionInfo{SessionKey: "cli:s", Model: "m1"}, 0); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, bucket string
		read         func(*session.Store) error
	}{
		{"info", bus.BucketSessions, func(s *session.Store) error {
			info, _, err := s.Info(ctx, "cli:s")
			if err == nil && info.GetModel() != "m1" {
				err = fmt.Errorf("read %v", info)
			}
			return err
		}},
		{"checkpoint", bus.BucketCheckpoints, func(s *session.Store) error {
			if _, _, err := s.Checkpoint(ctx, "cli:s"); !errors.Is(err, session.ErrNotFound) {
				return fmt.Errorf("checkpoint: %v, want ErrNotFound", err)
			}
			return nil
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := session.Open(ctx, hop.Connect(t, srv.ClientURL()))
			if err != nil {
				t.Fatal(err)
			}
			hop.CutAt(ctx, t, direct.Space.Bucket(tt.bucket), func() { err = tt.read(s) })
			if err != nil {
				t.Errorf("read with its answer lost with the connection: %v", err)
			}
		})
	}
}
