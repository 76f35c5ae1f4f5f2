package session_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// TestHistoryCacheReadsWhatTheStreamHolds: two caching stores (two
// workers) and a plain one share a bus; after every step of a random run
// of appends from either worker, other sessions' records in between,
// history clears, cursor moves, loads above a later cursor (a commit's
// re-read), purges that keep the last turns (as the heartbeat's) or none,
// and a conflicting append, each worker's load equals the plain store's.
// A cache that trusted its entry past a purge, a moved cursor or another
// worker's append would not.
func TestHistoryCacheReadsWhatTheStreamHolds(t *testing.T) {
	ctx := t.Context()
	srv := bustest.StartServer(t)
	b := srv.Connect(t, "")
	open := func(b *bus.Bus, opts ...session.Option) *session.Store {
		s, err := session.Open(ctx, b, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	plain := open(b)
	workers := []*session.Store{
		open(b, session.WithHistoryCache(1<<20)),
		open(srv.Connect(t, ""), session.WithHistoryCache(1<<20)),
	}
	hist, err := b.JS.Stream(ctx, b.Space.HistoryStream())
	if err != nil {
		t.Fatal(err)
	}
	const key = "cli:cache"
	var after, noiseLast uint64
	rng := rand.New(rand.NewPCG(1, 2))
	n := 0
	appendTurn := func(s *session.Store, clears bool) {
		t.Helper()
		h, err := s.LoadHistory(ctx, key, after)
		if err != nil {
			t.Fatal(err)
		}
		n++
		rec := turn(fmt.Sprint("t", n), uint64(n), fmt.Sprint("msg ", n))
		rec.ClearsHistory = clears
		if _, err := s.Append(ctx, key, rec, h.LastSeq); err != nil {
			t.Fatal(err)
		}
		if noiseLast, err = plain.Append(ctx, "cli:noise", turn(fmt.Sprint("n", n), 0, "noise"), noiseLast); err != nil {
			t.Fatal(err)
		}
	}
	for step := range 300 {
		w := workers[rng.IntN(len(workers))]
		var what string
		switch r := rng.IntN(21); {
		case r < 12:
			what = "append"
			appendTurn(w, false)
		case r < 13:
			what = "clear"
			appendTurn(w, true)
		case r < 16:
			what = "cursor"
			h, err := plain.LoadHistory(ctx, key, after)
			if err != nil {
				t.Fatal(err)
			}
			if len(h.Turns) > 0 {
				after = h.Turns[rng.IntN(len(h.Turns))].Seq
			}
		case r < 18:
			what = "purge keeping 3"
			if err := hist.Purge(ctx, jetstream.WithPurgeSubject(b.Space.History(key)), jetstream.WithPurgeKeep(3)); err != nil {
				t.Fatal(err)
			}
		case r < 19:
			what = "purge"
			if err := hist.Purge(ctx, jetstream.WithPurgeSubject(b.Space.History(key))); err != nil {
				t.Fatal(err)
			}
		case r < 20:
			// As a turn's commit re-reads after a conflict: above the
			// record it expected last, a later cursor than the next
			// turn's.
			what = "load above a later cursor"
			h, err := plain.LoadHistory(ctx, key, after)
			if err != nil {
				t.Fatal(err)
			}
			if len(h.Turns) > 1 {
				if _, err := w.LoadHistory(ctx, key, h.Turns[rng.IntN(len(h.Turns)-1)].Seq); err != nil {
					t.Fatal(err)
				}
			}
		default:
			what = "stale append"
			h, err := w.LoadHistory(ctx, key, after)
			if err != nil {
				t.Fatal(err)
			}
			appendTurn(workers[0], false)
			appendTurn(workers[1], false)
			if _, err := w.Append(ctx, key, turn("stale", 0, "stale"), h.LastSeq); err == nil {
				t.Fatalf("step %d: an append expecting %d after two more went through", step, h.LastSeq)
			}
		}
		want, err := plain.LoadHistory(ctx, key, after)
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range workers {
			got, err := w.LoadHistory(ctx, key, after)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(seqs(got), seqs(want)) || got.LastSeq != want.LastSeq {
				t.Fatalf("step %d (%s), worker %d: turns %v, last %d; the stream holds %v, last %d",
					step, what, i, seqs(got), got.LastSeq, seqs(want), want.LastSeq)
			}
		}
	}
}

// TestHistoryCacheLoadsAreTheCallers: a caller appending to a loaded
// History (as a turn's commit does) changes neither the cache nor the
// next load, with a budget that holds the session and with one below a
// single record (TestHistoryCacheBudget checks that nothing is kept then).
func TestHistoryCacheLoadsAreTheCallers(t *testing.T) {
	ctx := t.Context()
	b := bustest.StartJetStream(t)
	for _, budget := range []int64{1 << 20, 10} {
		t.Run(fmt.Sprint("budget ", budget), func(t *testing.T) {
			s, err := session.Open(ctx, b, session.WithHistoryCache(budget))
			if err != nil {
				t.Fatal(err)
			}
			key := fmt.Sprint("cli:own-", budget)
			var last uint64
			for i := range 3 {
				if last, err = s.Append(ctx, key, turn(fmt.Sprint(key, "-t", i), uint64(i+1), "hi"), last); err != nil {
					t.Fatal(err)
				}
			}
			first, err := s.LoadHistory(ctx, key, 0)
			if err != nil {
				t.Fatal(err)
			}
			first.Turns = append(first.Turns, session.Turn{Seq: 999, Record: &nanofleetv1.TurnRecord{TurnId: "mine"}})
			first.Turns[0] = session.Turn{Seq: 998}
			again, err := s.LoadHistory(ctx, key, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := seqs(again); len(got) != 3 || got[0] == 998 || again.LastSeq != last {
				t.Errorf("second load: turns %v, last %d; want the three appended, last %d", got, again.LastSeq, last)
			}
		})
	}
}

// TestHistoryCacheSeesAStreamMadeAnew: after the history stream is deleted
// and made again, records at the sequences a worker cached are other
// records; a cache that trusted the sequence alone would serve the old.
func TestHistoryCacheSeesAStreamMadeAnew(t *testing.T) {
	ctx := t.Context()
	b := bustest.StartJetStream(t)
	cached, err := session.Open(ctx, b, session.WithHistoryCache(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := session.Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	const key = "cli:anew"
	appendTwo := func(s *session.Store, prefix string) {
		t.Helper()
		var last uint64
		for i := range 2 {
			if last, err = s.Append(ctx, key, turn(fmt.Sprint(prefix, i), uint64(i+1), prefix), last); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendTwo(cached, "old")
	if _, err := cached.LoadHistory(ctx, key, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.JS.DeleteStream(ctx, b.Space.HistoryStream()); err != nil {
		t.Fatal(err)
	}
	if err := bus.Provision(ctx, b, bustest.TestLayout()); err != nil {
		t.Fatal(err)
	}
	appendTwo(plain, "new")
	h, err := cached.LoadHistory(ctx, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tr := range h.Turns {
		ids = append(ids, tr.Record.GetTurnId())
	}
	if want := []string{"new0", "new1"}; !slices.Equal(ids, want) {
		t.Errorf("load after the stream was made anew: turns %v, want %v", ids, want)
	}
}

func seqs(h *session.History) []uint64 {
	out := make([]uint64, len(h.Turns))
	for i, t := range h.Turns {
		out[i] = t.Seq
	}
	return out
}

// BenchmarkTurnHistory is a turn's history work: load the session's
// history above the cursor, append the turn. 50 sessions of 30 turns each
// were written interleaved first, as sessions talking at once write them.
func BenchmarkTurnHistory(b *testing.B) {
	for _, cache := range []int64{0, 16 << 20} {
		b.Run(fmt.Sprint("cache=", cache), func(b *testing.B) {
			ctx := b.Context()
			bb := bustest.StartJetStream(b)
			s, err := session.Open(ctx, bb, session.WithHistoryCache(cache))
			if err != nil {
				b.Fatal(err)
			}
			const sessions, turns = 50, 30
			last := make([]uint64, sessions)
			n := 0
			write := func(i int) {
				n++
				if last[i], err = s.Append(ctx, fmt.Sprint("cli:", i), turn(fmt.Sprint("t", n), uint64(n), "a message of a few words"), last[i]); err != nil {
					b.Fatal(err)
				}
			}
			for range turns {
				for i := range sessions {
					write(i)
				}
			}
			for i := 0; b.Loop(); i++ {
				key := i % sessions
				if _, err := s.LoadHistory(ctx, fmt.Sprint("cli:", key), 0); err != nil {
					b.Fatal(err)
				}
				write(key)
			}
		})
	}
}
