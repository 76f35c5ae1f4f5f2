package bus

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/backoff"
)

// Transient reports whether err is a bus failure that passes by itself:
// no server reachable, a request that timed out or found no responder, a
// cluster without a leader or with a stream offline for now. Anything
// else (a refused configuration, a bad layout, an error of the caller's)
// is not: retrying it cannot help.
func Transient(err error) bool {
	switch {
	case err == nil, errors.Is(err, context.Canceled):
		return false
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, nats.ErrNoServers),
		errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, jetstream.ErrJetStreamNotEnabled),
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount),
		errors.Is(err, jetstream.ErrNoHeartbeat),
		errors.Is(err, jetstream.ErrNoStreamResponse): // a publish while the stream has no leader
		return true
	}
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorCode {
	case 10005, // no suitable peers for placement (nodes still joining, or down)
		10008, // JetStream system temporarily unavailable (no meta leader)
		10009, // cluster can not handle request (not the leader)
		10041, // raft error
		10118, // stream is offline
		10119, // consumer is offline
		10194, // stream is offline: reason
		10195: // consumer is offline: reason
		return true
	case 10010, // JetStream clustering required
		10035, // account not found
		10036, // not supported in clustered mode
		10063: // expected stream sequence does not match
		// 503s that say what the server is or what the request asked,
		// not how the cluster is doing: asking again gets the same answer.
		return false
	}
	return api.Code == 503 || api.Code == 408 || api.Code == 429
}

// RequestTry bounds one try of a request that is answered in
// milliseconds but may never be answered: one sent while the JetStream
// meta leader or a stream's leader steps down (its node stopping). A
// consumer creation so lost left a CLI client without replies for 11 s,
// and a stream read left `nanofleet status` without the stream until its
// deadline.
const RequestTry = 3 * time.Second

// Retry calls f until it succeeds, fails with an error that is not
// [Transient], or ctx ends, waiting by b between attempts
// ([backoff.Retry]). failed, if not nil, is told of each transient
// failure and the wait before the next attempt (to log it, or to report
// not ready). f must bound each attempt with its own deadline, as
// [RetryEach] does: a request lost with a server that died must fail and
// be retried. An error of ctx's ending matches ctx's error and the last
// failure both.
func Retry(ctx context.Context, b backoff.Backoff, f func(context.Context) error, failed func(err error, wait time.Duration)) error {
	return RetryEach(ctx, b, 0, f, failed)
}

// RetryEach is [Retry] with each attempt given at most try.
func RetryEach(ctx context.Context, b backoff.Backoff, try time.Duration, f func(context.Context) error, failed func(err error, wait time.Duration)) error {
	return backoff.Retry{Try: try, Again: Transient, Wait: b.Wait, Failed: failed}.Do(ctx, f)
}
