package session

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/directget"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Usage sums the token usage of every turn the session has in its history,
// before /new and consolidation included, and counts the turns that used
// the model. It reads the whole history: for commands, not for every turn.
func (s *Store) Usage(ctx context.Context, key string) (*nanofleetv1.TokenUsage, int, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	total := &nanofleetv1.TokenUsage{}
	turns := 0
	err := s.direct.Scan(ctx, s.space.HistoryStream(), s.space.History(key), 1, 0, 0, func(m directget.Msg) error {
		rec := &nanofleetv1.TurnRecord{}
		if err := proto.Unmarshal(m.Data, rec); err != nil {
			return fmt.Errorf("record %d: %w", m.Seq, err)
		}
		if u := rec.GetUsage(); u != nil {
			AddUsage(total, u)
			turns++
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("usage of %s: %w", key, err)
	}
	return total, turns, nil
}

// AddUsage adds u to total; total's model becomes u's when u names one.
func AddUsage(total, u *nanofleetv1.TokenUsage) {
	total.PromptTokens += u.GetPromptTokens()
	total.CompletionTokens += u.GetCompletionTokens()
	total.CachedTokens += u.GetCachedTokens()
	total.ReasoningTokens += u.GetReasoningTokens()
	total.ModelCalls += u.GetModelCalls()
	if u.GetModel() != "" {
		total.Model = u.GetModel()
	}
}
