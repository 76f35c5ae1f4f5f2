package gateway

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// TestLiveQueueEndsATurn: a turn's last reply waits for the turn's live
// delivery under way, and the turn's live messages still waiting or
// arriving later are dropped; other turns' are not.
func TestLiveQueueEndsATurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var mu sync.Mutex
		var got []string
		record := func(s string) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, s)
		}
		q := &liveQueue{
			deliver: func(out *nanofleetv1.OutboundMessage) {
				if out.GetContent() == "hint 1" {
					<-release // a platform call that takes its time
				}
				record(out.GetContent())
			},
			slots: make(chan struct{}, liveParallel),
			chats: map[string]*liveChat{},
			ended: map[turnOf]time.Time{},
		}
		live := func(turn, content string) *nanofleetv1.OutboundMessage {
			return &nanofleetv1.OutboundMessage{ChatId: "c", TurnId: turn, Content: content, Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT}
		}
		q.add(live("t1", "hint 1"))
		q.add(live("t1", "hint 2"))
		q.add(live("t0", "late hint of an older turn"))
		synctest.Wait() // hint 1 under way, the others waiting

		ended := make(chan struct{})
		go func() {
			q.end(t.Context(), &nanofleetv1.OutboundMessage{ChatId: "c", TurnId: "t1", LastOfTurn: true})
			record("final")
			close(ended)
		}()
		synctest.Wait()
		select {
		case <-ended:
			t.Fatal("the last reply did not wait for the turn's hint under way")
		default:
		}
		close(release)
		<-ended
		q.add(live("t1", "hint 3, after the final"))
		q.add(live("t2", "next turn's hint"))
		synctest.Wait()
		q.close()

		mu.Lock()
		defer mu.Unlock()
		// The older turn's hint waited behind hint 1, so it may come
		// before or after the final; hints 2 and 3 of the ended turn
		// never come.
		older := slices.Index(got, "late hint of an older turn")
		if older < 1 {
			t.Fatalf("delivered %q: the older turn's hint is missing or before hint 1", got)
		}
		if want := []string{"hint 1", "final", "next turn's hint"}; !slices.Equal(slices.Delete(slices.Clone(got), older, older+1), want) {
			t.Errorf("delivered %q, want %q and the older turn's hint", got, want)
		}
	})
}

// TestLiveQueueEndWaitIsBounded: a live delivery that hangs holds its
// turn's last reply for endWait at most.
func TestLiveQueueEndWaitIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		q := &liveQueue{
			deliver: func(*nanofleetv1.OutboundMessage) { <-release },
			slots:   make(chan struct{}, liveParallel),
			chats:   map[string]*liveChat{},
			ended:   map[turnOf]time.Time{},
		}
		q.add(&nanofleetv1.OutboundMessage{ChatId: "c", TurnId: "t1", Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS})
		synctest.Wait()
		start := time.Now()
		q.end(t.Context(), &nanofleetv1.OutboundMessage{ChatId: "c", TurnId: "t1", LastOfTurn: true})
		if waited := time.Since(start); waited != endWait {
			t.Errorf("the last reply waited %s, want endWait (%s)", waited, endWait)
		}
		close(release)
		q.close()
	})
}
