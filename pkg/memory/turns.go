package memory

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// ReadTurns returns the session's turn records with a history sequence in
// [from, to], oldest first. Unlike session.Store.LoadHistory it ignores
// /new resets: a consolidator must see the turns a reset hid.
func ReadTurns(ctx context.Context, b *bus.Bus, sessionKey string, from, to uint64) ([]session.Turn, error) {
	if from == 0 {
		from = 1
	}
	msgs, err := b.Direct.Range(ctx, b.Space.HistoryStream(), b.Space.History(sessionKey), from, to, 0)
	if err != nil {
		return nil, fmt.Errorf("turns of %s: %w", sessionKey, err)
	}
	out := make([]session.Turn, 0, len(msgs))
	for _, m := range msgs {
		rec := &nanofleetv1.TurnRecord{}
		if err := proto.Unmarshal(m.Data, rec); err != nil {
			return nil, fmt.Errorf("turns of %s: record %d: %w", sessionKey, m.Seq, err)
		}
		out = append(out, session.Turn{Seq: m.Seq, Record: rec})
	}
	return out, nil
}
