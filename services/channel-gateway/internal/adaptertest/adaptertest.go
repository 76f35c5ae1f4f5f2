// Package adaptertest is the behaviour every channel adapter owes its
// platform, written once: each scenario runs a gateway with the adapter
// against the platform's fake (a real embedded JetStream, internal/workertest
// as the agent worker) and drives it through a small per-platform Fake.
//
// A platform's test calls Run with its Platform; what only one platform does
// (its markup, its threads, its connection) stays in its own tests.
package adaptertest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/gatewaytest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

// Wait bounds every wait of a scenario for something to happen.
const Wait = 10 * time.Second

// The users of the scenarios. A Platform maps them to its own ids.
const (
	// Owner is on the allowlist where a scenario keeps strangers out.
	Owner = "owner"
	// Stranger is on no allowlist.
	Stranger = "stranger"
	// Alice writes where everyone may ("*").
	Alice = "alice"
)

// Platform is one platform's part of the scenarios.
type Platform struct {
	// Limit is the longest message the adapter sends, counted as
	// markup.Split counts.
	Limit int
	// Quotes is which pieces of an answer to a direct message refer to
	// the message they answer.
	Quotes Quoting
	// Group is the id of the group chat Fake.Group writes in, as Sent.Chat
	// and groupAllowFrom name it.
	Group string
	// Allowlist and Disabled say whether the platform has the allowlist
	// and disabled group policies.
	Allowlist, Disabled bool
	// Start runs a gateway on b with the adapter, configured with common
	// (and Enabled), against a fake of its own, logging to log, and
	// returns the fake once the adapter is connected.
	Start func(t *testing.T, b *bus.Bus, common channelconfig.Common, log *slog.Logger) Fake
}

// Quoting is which pieces of an answer refer to the message it answers.
type Quoting int

const (
	// QuotesNone: none do.
	QuotesNone Quoting = iota
	// QuotesFirst: the first piece does (Telegram's reply_parameters,
	// Discord's message_reference).
	QuotesFirst
	// QuotesEvery: every piece does (Feishu's replies).
	QuotesEvery
)

// quotes reports whether piece i of an answer refers to its question.
func (q Quoting) quotes(i int) bool {
	return q == QuotesEvery || (q == QuotesFirst && i == 0)
}

// Fake is a running fake platform, as the scenarios drive it. Events are
// numbered: the same n again is the platform delivering that event again.
type Fake interface {
	// DM delivers event n, a direct message from user, and returns the id
	// the inbound message carries and the chat the answer goes to.
	DM(t *testing.T, n int, user, text string) (id, chat string)
	// Group delivers event n, a message from user in the group chat,
	// mentioning the bot as the platform does when mention is set.
	Group(t *testing.T, n int, user, text string, mention bool)
	// Next returns the next message the adapter sent (or tried to send, for
	// a platform whose fake records refused sends), waiting up to Wait.
	Next(t *testing.T) Sent
	// RateLimit makes the platform take the next after sends and refuse
	// the one after them as over its rate limit, and returns how long it
	// asks the adapter to wait.
	RateLimit(t *testing.T, after int) time.Duration
	// Restart stops the gateway running the adapter and runs another,
	// with a new adapter configured alike, on the same bus against this
	// fake, as when a gateway stops and another takes its work over; it
	// returns once the new adapter is connected.
	Restart(t *testing.T)
	// Malformed delivers payloads the adapter must drop, numbered from
	// event 1 where they have numbers (at most 9 of them), and returns the
	// lines the adapter logs when it drops one and how many of them it
	// logs at least (some the platform's client library drops itself;
	// Telegram's fake serves an update without an update_id again, as it
	// cannot be confirmed).
	Malformed(t *testing.T) (logged []string, n int)
}

// Restarter runs a Fake's gateway and replaces it: embedded in a Fake, it
// is the Fake's Restart.
type Restarter struct {
	run  func() (stop func())
	stop func()
}

// NewRestarter runs the gateway run starts; run returns once the adapter
// is connected, with a function that stops the gateway.
func NewRestarter(run func() (stop func())) *Restarter {
	return &Restarter{run: run, stop: run()}
}

// Restart stops the gateway and runs another.
func (r *Restarter) Restart(*testing.T) {
	r.stop()
	r.stop = r.run()
}

// Connections is a fake that counts the adapter's connections to it.
type Connections interface {
	Connections() int
	WaitConnections(t testing.TB, n int, timeout time.Duration)
}

// NewConnectedRestarter is NewRestarter for a platform the adapter holds a
// connection to: each gateway run starts counts as up once its adapter
// has made a new connection to fake.
func NewConnectedRestarter(t *testing.T, fake Connections, run func() (stop func())) *Restarter {
	return NewRestarter(func() func() {
		n := fake.Connections()
		stop := run()
		fake.WaitConnections(t, n+1, Wait)
		return stop
	})
}

// Sent is a message the adapter sent to the platform.
type Sent struct {
	Chat, Text string
	// Refused is set when the platform refused it (rate limit).
	Refused bool
	// Quotes says whether it refers to the message it answers.
	Quotes bool
	// Key is the idempotency key the platform drops a repeated send by
	// (Feishu's uuid, Discord's nonce), if it has one.
	Key string
	// At is when the platform received it.
	At time.Time
}

// Env is what an adapter runs with in a test: a bus with the channels'
// assets and a scripted agent worker on it.
type Env struct {
	Bus    *bus.Bus
	Worker *workertest.Worker
}

// NewEnv starts JetStream with the channels' assets and a worker answering
// with script.
func NewEnv(t *testing.T, script workertest.Script, opts ...workertest.Option) Env {
	t.Helper()
	b := bustest.StartJetStream(t, channels.Assets)
	return Env{Bus: b, Worker: workertest.Start(t, b, script, opts...)}
}

// StartGateway is gatewaytest.Start for an adapter of type A, which it
// returns too, for a test that calls the adapter's own methods.
func StartGateway[A gateway.Adapter](t *testing.T, b *bus.Bus, log *slog.Logger, build func(ctx context.Context, deps adapterdeps.Deps, log *slog.Logger) (A, error)) (*gatewaytest.Gateway, A) {
	t.Helper()
	var a A
	g := gatewaytest.Start(t, b, log, func(ctx context.Context, deps adapterdeps.Deps, log *slog.Logger) (gateway.Adapter, error) {
		var err error
		a, err = build(ctx, deps, log)
		return a, err
	})
	return g, a
}

// Status returns the newest status record of channel (of any gateway),
// failing the test when there is none.
func Status(t *testing.T, b *bus.Bus, channel string) *status.Record {
	t.Helper()
	board, err := status.Open(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := board.Records(t.Context(), channel)
	if err != nil || len(recs) == 0 {
		t.Fatalf("status records: %v, %v", recs, err)
	}
	return &recs[0]
}

// harness is one scenario's bus, worker, fake and logs.
type harness struct {
	bus    *bus.Bus
	worker *workertest.Worker
	fake   Fake
	logs   *gatewaytest.Logs
}

func start(t *testing.T, p Platform, common channelconfig.Common, script workertest.Script) *harness {
	t.Helper()
	env := NewEnv(t, script)
	h := &harness{bus: env.Bus, worker: env.Worker, logs: &gatewaytest.Logs{}}
	common.Enabled = true
	h.fake = p.Start(t, h.bus, common, slog.New(slog.NewTextHandler(h.logs, nil)))
	return h
}
