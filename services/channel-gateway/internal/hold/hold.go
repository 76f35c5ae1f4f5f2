// Package hold runs a channel's connection only while this gateway holds
// the fleet lease for the bot account, so that one connection per account
// runs in the fleet: the others wait and take over within the lease TTL
// when the holder stops or dies.
package hold

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/lease"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

// Key is the lease key for a bot account: the channel name and a hash of
// the account's id, so that no secret appears in the bucket.
func Key(channel, account string) string { return channel + "-conn-" + Hash(account) }

// Hash names a secret (a bot token, an account's id) in keys without
// revealing it: 16 hex digits of its SHA-256.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:8])
}

// Option tunes [Run].
type Option func(*options)

type options struct {
	account string
	status  *status.Reporter
}

// WithAccount names the account the connection runs as (e.g. a bot's
// @name) on the status board.
func WithAccount(name string) Option { return func(o *options) { o.account = name } }

// WithStatus reports the connection's state on the gateway's status
// records through r, and makes the gateway's id (r.Gateway) the lease's
// owner, which readers compare a record's holder with. Without it the
// connection is not reported and the owner is host/pid/random.
func WithStatus(r *status.Reporter) Option { return func(o *options) { o.status = r } }

// Run calls work while holding the lease key in the fleet's lease bucket,
// cancelling work's context when the lease is lost; it waits while another
// gateway holds the lease, and starts over when work returns before ctx
// ends (after a pause, so a failing connection is not hammered). It
// returns nil when ctx ends, work's error when it is a [*Fatal], or an
// error when the lease bucket is unusable.
//
// With [WithStatus] it reports the channel's state (the part of key
// before the first '-'): connected when it takes the lease, failed with
// the reason when work fails, stopped when it lets the lease go.
func Run(ctx context.Context, b *bus.Bus, key string, log *slog.Logger, work func(context.Context) error, opts ...Option) error {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	kv, err := b.KV(ctx, bus.BucketLeases)
	if err != nil {
		return fmt.Errorf("hold: %w", err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return fmt.Errorf("hold: lease bucket status: %w", err)
	}
	ttl := st.TTL()
	if ttl <= 0 {
		return errors.New("hold: the lease bucket has no TTL")
	}
	table := lease.NewTable(kv)
	owner := o.status.Gateway()
	if owner == "" {
		owner = ownerName()
	}
	channel, _, _ := strings.Cut(key, "-")
	waiting := false
	// Connections that end soon after they were made are made again by a
	// backoff from a second to 30 s; one that lasted starts it again.
	pace, short := backoff.Backoff{Min: time.Second, Max: 30 * time.Second}, 0
	for ctx.Err() == nil {
		l, err := table.Acquire(ctx, key, owner)
		if errors.Is(err, lease.ErrHeld) {
			if !waiting {
				holder, _ := table.Holder(ctx, key)
				log.Warn("another gateway holds this account's connection; waiting to take over", "holder", holder, "lease", key)
				waiting = true
			}
			// Asked often, so that the takeover follows the lease's
			// expiry closely: within the TTL of the holder's death.
			_ = backoff.Sleep(ctx, ttl/10) // the loop checks ctx
			continue
		}
		if err != nil {
			log.Warn("connection lease", "err", err)
			_ = backoff.Sleep(ctx, time.Second) // the loop checks ctx
			continue
		}
		waiting = false
		log.Info("this gateway holds the account's connection lease", "lease", key, "owner", owner)
		ended := o.status.Holding(ctx, log, channel, key, o.account)
		start := time.Now()
		err = holding(ctx, l, ttl, log, work, ended)
		var fatal *Fatal
		if errors.As(err, &fatal) && ctx.Err() == nil {
			return err
		}
		if time.Since(start) > time.Minute {
			short = 0
		}
		pause := pace.Wait(short)
		short++
		if err != nil && ctx.Err() == nil {
			log.Warn("connection ended, reconnecting", "err", err, "in", pause)
		}
		_ = backoff.Sleep(ctx, pause) // the loop checks ctx
	}
	return nil
}

// holding runs work while renewing l, and releases l when work returns,
// after calling ended with work's error (so that its report is written
// before another gateway can take over).
func holding(ctx context.Context, l *lease.Lease, ttl time.Duration, log *slog.Logger, work func(context.Context) error, ended func(context.Context, error)) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			if err := l.Renew(wctx); err != nil {
				if wctx.Err() != nil {
					return
				}
				log.Error("lost the connection lease; disconnecting", "err", err)
				cancel()
				return
			}
		}
	}()
	err := work(wctx)
	cancel()
	<-renewed
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer rcancel()
	if ctx.Err() != nil {
		ended(rctx, nil)
	} else {
		ended(rctx, err)
	}
	if rerr := l.Release(rctx); rerr != nil {
		log.Warn("release connection lease", "err", rerr)
	}
	return err
}

// ownerName is unique among live gateways: host, pid and a random tail;
// the owner of a connection whose gateway does not report it.
func ownerName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), rand.Text()[:6])
}
