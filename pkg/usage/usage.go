// Package usage counts the tokens each user spends per UTC day,
// fleet-wide, in the KV bucket "usage": what the agent worker's daily
// token budget (worker.dailyTokenBudget) checks before a turn. The workers
// add their turns' tokens, the memory consolidators those of the model
// calls that consolidate a user's turns.
//
// A user is a payer, "<channel>:<sender>" (the agent worker's
// subagent.Payer: the sender, or for a subagent's task the user who
// spawned it). Key "<subject.Token(payer)>.<yyyymmdd>", value the decimal
// count; an entry expires 48 h after its last update. Every add is a
// compare-and-set, so adds from any number of processes all count.
package usage

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/subject"
)

// Bucket holds the tokens each user spent per UTC day.
const Bucket = "usage"

// Assets declares the usage bucket for [bus.Provision]. Every service that
// counts tokens declares it, whether or not a budget is set: a budget can
// be switched on without another service provisioning anything, and an
// empty bucket costs next to nothing.
func Assets(sp subject.Space, l bus.Layout) bus.Assets {
	return bus.KeyValue(jetstream.KeyValueConfig{
		Bucket: Bucket, Description: "tokens per user and UTC day, for worker.dailyTokenBudget",
		History: 1, TTL: 48 * time.Hour,
	})(sp, l)
}

// Counter reads and adds users' daily tokens. Safe for concurrent use.
type Counter struct {
	kv  jetstream.KeyValue
	now func() time.Time
}

// Open opens the usage bucket; [Assets] must have been provisioned.
func Open(ctx context.Context, b *bus.Bus) (*Counter, error) {
	kv, err := b.KV(ctx, Bucket)
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	return &Counter{kv: kv, now: time.Now}, nil
}

// Key is payer's key of the UTC day of t.
func Key(payer string, t time.Time) string {
	return subject.Token(payer) + "." + t.UTC().Format("20060102")
}

// Spent returns payer's tokens today (UTC).
func (c *Counter) Spent(ctx context.Context, payer string) (int64, error) {
	e, err := bus.Get(ctx, c.kv, Key(payer, c.now()))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read token usage: %w", err)
	}
	n, err := strconv.ParseInt(string(e.Value()), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read token usage: %w", err)
	}
	return n, nil
}

// Add adds tokens to payer's count of today (UTC), with compare-and-set
// against every other process adding ([bus.Modify]: a lost
// compare-and-set is tried again after a short jittered wait, within
// bus.CallTimeout). Adding nothing writes nothing.
func (c *Counter) Add(ctx context.Context, payer string, tokens int64) error {
	if tokens == 0 {
		return nil
	}
	_, err := bus.Modify(ctx, c.kv, Key(payer, c.now()), func(old []byte, exists bool) ([]byte, error) {
		var n int64
		if exists {
			var err error
			if n, err = strconv.ParseInt(string(old), 10, 64); err != nil {
				return nil, err
			}
		}
		return []byte(strconv.FormatInt(n+tokens, 10)), nil
	})
	switch {
	case err == nil:
		return nil
	case bus.Conflict(err): // only when the call's time ran out
		return fmt.Errorf("count tokens of %s: %w", payer, ErrContention)
	}
	return fmt.Errorf("count tokens: %w", err)
}
