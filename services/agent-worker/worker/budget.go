package worker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/subject"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/subagent"
)

// BucketUsage holds the tokens each user spent per UTC day, for the daily
// budget.
const BucketUsage = "usage"

// Assets declares the usage bucket of the daily token budget for
// [bus.Provision]. It is declared whether or not a budget is set: a
// worker's budget can be switched on without another service provisioning
// anything, and an empty bucket costs next to nothing.
func Assets(sp subject.Space, _ bus.Layout) bus.Assets {
	return bus.Assets{Buckets: []jetstream.KeyValueConfig{{
		Bucket: sp.Bucket(BucketUsage), Description: "tokens per user and UTC day, for worker.dailyTokenBudget",
		History: 1, TTL: 48 * time.Hour,
	}}}
}

// budget keeps each user's daily tokens in a KV bucket shared by every
// worker: key "<user token>.<yyyymmdd>", value the decimal count. Entries
// expire two days after their last update.
type budget struct {
	limit int64
	kv    jetstream.KeyValue
	now   func() time.Time
}

// openBudget opens the usage bucket; [Assets] must have been provisioned.
func openBudget(ctx context.Context, b *bus.Bus, limit int64) (*budget, error) {
	kv, err := b.KV(ctx, BucketUsage)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	return &budget{limit: limit, kv: kv, now: time.Now}, nil
}

func (b *budget) key(in *nanofleetv1.InboundMessage) string {
	return subject.Token(subagent.Payer(in)) + "." + b.now().UTC().Format("20060102")
}

// spent returns the user's tokens today.
func (b *budget) spent(ctx context.Context, in *nanofleetv1.InboundMessage) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, bus.CallTimeout)
	defer cancel()
	e, err := b.kv.Get(ctx, b.key(in))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read token budget: %w", err)
	}
	return strconv.ParseInt(string(e.Value()), 10, 64)
}

// add counts a turn's tokens, with compare-and-set against the other
// workers.
func (b *budget) add(ctx context.Context, in *nanofleetv1.InboundMessage, u *nanofleetv1.TokenUsage) error {
	n := u.GetPromptTokens() + u.GetCompletionTokens()
	if n == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, bus.CallTimeout)
	defer cancel()
	key := b.key(in)
	for range 10 {
		e, err := b.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			_, err = b.kv.Create(ctx, key, []byte(strconv.FormatInt(n, 10)))
		case err == nil:
			var old int64
			if old, err = strconv.ParseInt(string(e.Value()), 10, 64); err == nil {
				_, err = b.kv.Update(ctx, key, []byte(strconv.FormatInt(old+n, 10)), e.Revision())
			}
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) { // a wrong revision matches it too
			return fmt.Errorf("count tokens: %w", err)
		}
	}
	return errors.New("count tokens: too many concurrent updates")
}

// spentText is the reply of a turn refused for the budget.
func (b *budget) spentText(spent int64) string {
	next := b.now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	return fmt.Sprintf("You have used today's token budget (%d of %d tokens). It renews at %s UTC, in %s.",
		spent, b.limit, next.Format("15:04"), next.Sub(b.now()).Round(time.Minute))
}
