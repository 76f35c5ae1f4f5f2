package parts_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/parts"
)

// newStore starts JetStream with a delivered bucket and returns a store
// on it and the bucket.
func newStore(t *testing.T) (*parts.Store, jetstream.KeyValue) {
	t.Helper()
	b := bustest.StartJetStream(t, bus.KeyValue(jetstream.KeyValueConfig{Bucket: "delivered"}))
	kv, err := b.KV(t.Context(), "delivered")
	if err != nil {
		t.Fatal(err)
	}
	return parts.NewStore(kv), kv
}

// TestStoreIsShared: what one gateway's store marks, another's reads;
// ids of any characters are kept apart, an empty id is not tracked, and a
// record that is not a count is an error rather than a guess.
func TestStoreIsShared(t *testing.T) {
	one, kv := newStore(t)
	other := parts.NewStore(kv)
	tests := []struct {
		name, id string
		mark     int // 0: none
		want     int
	}{
		{"never sent", "9:0", 0, 0},
		{"two pieces", "9:1", 2, 2},
		{"an id a key cannot hold", "9:1 *.>", 5, 5},
		{"no id", "", 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.mark > 0 {
				if err := one.Mark(t.Context(), tt.id, tt.mark); err != nil {
					t.Fatal(err)
				}
			}
			if n, err := other.Sent(t.Context(), tt.id); n != tt.want || err != nil {
				t.Errorf("Sent = %d, %v; want %d", n, err, tt.want)
			}
		})
	}
	if got, _ := other.Sent(t.Context(), "9:1"); got != 2 {
		t.Errorf("9:1 became %d, overwritten by another id", got)
	}
	if _, err := kv.Put(t.Context(), "parts-bad", []byte("many")); err != nil {
		t.Fatal(err)
	}
	var de *gateway.DeliveryError
	if _, err := other.Sent(t.Context(), "bad"); !errors.As(err, &de) || de.Retryable {
		t.Errorf("a record that is not a count read as %v, want a permanent delivery error", err)
	}
}

// TestSend: pieces are sent in order from start, each one the platform
// took is recorded before the next starts, so that a retry — on any
// gateway — starts after the last one taken; a delivery stopped while a
// piece is in flight finishes and records that piece, and sends no more.
func TestSend(t *testing.T) {
	errDown := errors.New("platform down")
	tests := []struct {
		name     string
		start    int
		failAt   int // -1: none fails
		stopAt   int // the delivery's context ends while this piece is sent; -1: never
		wantSent []int
		wantRec  int
		retry    bool // the error is a retry of the delivery, not send's
	}{
		{"all", 0, -1, -1, []int{0, 1, 2}, 3, false},
		{"after a stream showed the first", 1, -1, -1, []int{1, 2}, 3, false},
		{"stops at the failure", 0, 1, -1, []int{0, 1}, 1, false},
		{"stopped while the platform takes a piece", 0, -1, 1, []int{0, 1}, 2, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, _ := newStore(t)
			id := fmt.Sprintf("r%d", i)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var sent []int
			err := store.Send(ctx, id, tt.start, 3, func(ctx context.Context, i int) error {
				sent = append(sent, i)
				if i == tt.stopAt {
					cancel()
					if ctx.Err() != nil {
						return ctx.Err() // the piece was cut off
					}
				}
				if i == tt.failAt {
					return errDown
				}
				return nil
			})
			var de *gateway.DeliveryError
			switch {
			case tt.failAt >= 0 && !errors.Is(err, errDown):
				t.Errorf("Send = %v, want %v", err, errDown)
			case tt.retry && (!errors.As(err, &de) || !de.Retryable):
				t.Errorf("Send = %v, want a retry", err)
			case tt.failAt < 0 && !tt.retry && err != nil:
				t.Errorf("Send = %v", err)
			}
			if fmt.Sprint(sent) != fmt.Sprint(tt.wantSent) {
				t.Errorf("sent pieces %v, want %v", sent, tt.wantSent)
			}
			if n, err := store.Sent(t.Context(), id); n != tt.wantRec || err != nil {
				t.Errorf("Sent = %d, %v after Send, want %d: a retry must start there", n, err, tt.wantRec)
			}
		})
	}
}

// TestSendReply: a reply's text pieces go first, each with its index
// among the pieces, then its attachments, each with its index among the
// attachments; start counts both, so that a retry continues after the
// last piece or attachment sent, and a failed attachment is the next one
// a retry sends.
func TestSendReply(t *testing.T) {
	errDown := errors.New("platform down")
	media := []*nanofleetv1.MediaRef{{Name: "a.png"}, {Name: "b.pdf"}}
	tests := []struct {
		name     string
		pieces   []string
		start    int
		failAt   string // the call that fails; "": none
		wantSent []string
		wantRec  int
	}{
		{"all", []string{"one", "two"}, 0, "", []string{"piece 0 one", "piece 1 two", "attach 0 a.png", "attach 1 b.pdf"}, 4},
		{"after a piece", []string{"one", "two"}, 1, "", []string{"piece 1 two", "attach 0 a.png", "attach 1 b.pdf"}, 4},
		{"after the text", []string{"one", "two"}, 2, "", []string{"attach 0 a.png", "attach 1 b.pdf"}, 4},
		{"after an attachment", []string{"one", "two"}, 3, "", []string{"attach 1 b.pdf"}, 4},
		{"no text", nil, 0, "", []string{"attach 0 a.png", "attach 1 b.pdf"}, 2},
		{"a piece fails", []string{"one", "two"}, 0, "piece 1 two", []string{"piece 0 one", "piece 1 two"}, 1},
		{"an attachment fails", []string{"one"}, 0, "attach 1 b.pdf", []string{"piece 0 one", "attach 0 a.png", "attach 1 b.pdf"}, 2},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, _ := newStore(t)
			id := fmt.Sprintf("r%d", i)
			var sent []string
			call := func(c string) error {
				sent = append(sent, c)
				if c == tt.failAt {
					return errDown
				}
				return nil
			}
			err := store.SendReply(t.Context(), id, tt.start, tt.pieces, media,
				func(_ context.Context, i int, text string) error { return call(fmt.Sprintf("piece %d %s", i, text)) },
				func(_ context.Context, i int, m *nanofleetv1.MediaRef) error {
					return call(fmt.Sprintf("attach %d %s", i, m.GetName()))
				})
			switch {
			case tt.failAt != "" && !errors.Is(err, errDown):
				t.Errorf("SendReply = %v, want %v", err, errDown)
			case tt.failAt == "" && err != nil:
				t.Errorf("SendReply = %v", err)
			}
			if fmt.Sprint(sent) != fmt.Sprint(tt.wantSent) {
				t.Errorf("sent %q, want %q", sent, tt.wantSent)
			}
			if n, err := store.Sent(t.Context(), id); n != tt.wantRec || err != nil {
				t.Errorf("Sent = %d, %v after SendReply, want %d: a retry must start there", n, err, tt.wantRec)
			}
		})
	}
}

// TestPieceKey: a piece's key is the same for every attempt and every
// release (a redelivery after an upgrade must carry the key the platform
// saw), and differs between pieces.
func TestPieceKey(t *testing.T) {
	tests := []struct {
		id   string
		i    int
		want string
	}{
		{"r1", 0, "ff168d284f7093b1ff6f2f1b77ba37b890b662d05e2464012d776cf3aeaea808"},
		{"r1", 1, "d892cd17665daf36632686b78c03c9b519318e2d78c7190c0f3a42b342fdf528"},
	}
	for _, tt := range tests {
		if got := parts.PieceKey(tt.id, tt.i); got != tt.want {
			t.Errorf("PieceKey(%q, %d) = %s, want %s", tt.id, tt.i, got, tt.want)
		}
	}
}
