package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/usage"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/subagent"
)

// budget is the daily token budget: each user's tokens of the UTC day,
// counted fleet-wide in the usage bucket (package usage), against limit.
type budget struct {
	limit int64
	count *usage.Counter
	now   func() time.Time
}

// openBudget opens the usage bucket; usage.Assets must have been
// provisioned.
func openBudget(ctx context.Context, b *bus.Bus, limit int64) (*budget, error) {
	c, err := usage.Open(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	return &budget{limit: limit, count: c, now: time.Now}, nil
}

// spent returns the tokens today of the user who pays for in.
func (b *budget) spent(ctx context.Context, in *nanofleetv1.InboundMessage) (int64, error) {
	return b.count.Spent(ctx, subagent.Payer(in))
}

// add counts a turn's tokens (prompt + completion) against the user who
// pays for in.
func (b *budget) add(ctx context.Context, in *nanofleetv1.InboundMessage, u *nanofleetv1.TokenUsage) error {
	return b.count.Add(ctx, subagent.Payer(in), u.GetPromptTokens()+u.GetCompletionTokens())
}

// spentText is the reply of a turn refused for the budget.
func (b *budget) spentText(spent int64) string {
	next := b.now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	return fmt.Sprintf("You have used today's token budget (%d of %d tokens). It renews at %s UTC, in %s.",
		spent, b.limit, next.Format("15:04"), next.Sub(b.now()).Round(time.Minute))
}
