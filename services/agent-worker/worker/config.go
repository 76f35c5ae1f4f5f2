package worker

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/agent-worker/agent"
)

// Config tunes a worker. The fields with a json tag are the config
// file's "worker" section, decoded straight into it; the rest are set by
// the service from the shared sections or by code.
type Config struct {
	// ID names the worker in leases and logs.
	ID string `json:"-"`
	// Agent whose profile and workspace the worker serves.
	Agent string `json:"-"`
	// Slots is how many turns this worker runs at once. A turn spends
	// nearly all its time waiting on the model, and a waiting turn costs a
	// goroutine, its prompt and a connection (docs/bench: per-turn cost),
	// so the default is sized for model latency, not for cores: 200
	// sessions on a 500 ms model need 200 slots to run at the model's
	// pace. The provider's own bound (providers.<name>.maxConcurrent,
	// halved on 429s) is what protects a slow or rate-limited model.
	Slots int `json:"turnsPerWorker"`
	// FleetTurnLimit is the consumer's MaxAckPending: turns in flight
	// across all workers, including messages waiting for their session.
	// At least Slots; the default lets 16 workers run at their default
	// slots.
	FleetTurnLimit int `json:"fleetTurnLimit"`
	// AckWait is how long a message may go without InProgress before
	// JetStream redelivers it; a running turn sends InProgress every
	// third of it, and renews its lease every third of the lease TTL.
	// It is also how long a turn waits when its delivery is lost with
	// the consumer leader's node (a cluster node stopping), hence 10 s
	// and not NATS's 30.
	AckWait config.Seconds `json:"ackWaitSeconds"`
	// LeaseTTL is the lease bucket's TTL (set by provisioning).
	LeaseTTL time.Duration `json:"-"`
	// TurnTimeout bounds one turn.
	TurnTimeout config.Seconds `json:"turnTimeoutSeconds"`
	// MaxAttempts is how many times a turn may be started before the
	// message is dead-lettered.
	MaxAttempts int `json:"maxAttempts"`
	// BusyDelay is the first redelivery delay of a message waiting for its
	// session; it doubles with each delivery up to MaxBusyDelay.
	BusyDelay, MaxBusyDelay time.Duration `json:"-"`
	// Model settings.
	Model               string         `json:"-"`
	Loop                agent.Config   `json:"-"`
	ContextWindowTokens int            `json:"-"`
	Location            *time.Location `json:"-"`
	Workspace           string         `json:"-"`
	// ShutdownGrace is how long running turns may take to finish after the
	// worker is told to stop.
	ShutdownGrace config.Seconds `json:"shutdownGraceSeconds"`
	// DailyTokenBudget is how many tokens (prompt + completion) one user
	// (channel and sender id) may spend per UTC day, fleet-wide; 0: no
	// budget. The memory consolidator counts the consolidations of a
	// user's turns in it too (package usage). A turn that starts with the
	// budget spent is answered with a message saying so, without the
	// model. What is left bounds the turn that starts with it: spent, the
	// model is asked to answer without tools.
	DailyTokenBudget int64 `json:"dailyTokenBudget"`
	// HistoryCacheMB bounds the session histories the worker keeps between
	// a session's turns (their records decoded), so that a turn
	// reads only the records appended since the session's last turn here
	// rather than all since the consolidation cursor; 0 keeps none.
	HistoryCacheMB int `json:"historyCacheMB"`
	// MessageAllowTo lists the chats besides its own that a session's
	// model may message with the message tool: "channel:chat",
	// "channel:*" or "*"; none by default.
	MessageAllowTo []string `json:"messageAllowTo,omitempty"`
}

// DefaultSlots is the default Config.Slots (worker.turnsPerWorker).
const DefaultSlots = 1024

// DefaultConfig returns nanobot-like defaults.
func DefaultConfig() Config {
	return Config{
		Agent:               "default",
		Slots:               DefaultSlots,
		FleetTurnLimit:      16 * DefaultSlots,
		AckWait:             config.Seconds(10 * time.Second),
		LeaseTTL:            30 * time.Second,
		TurnTimeout:         config.Seconds(10 * time.Minute),
		MaxAttempts:         5,
		BusyDelay:           20 * time.Millisecond,
		MaxBusyDelay:        2 * time.Second,
		Model:               "gpt-4o-mini",
		Loop:                agent.Config{MaxIterations: 40, Temperature: 0.1, MaxTokens: 8192},
		ContextWindowTokens: 200_000,
		Location:            time.UTC,
		ShutdownGrace:       config.Seconds(11 * time.Minute),
		HistoryCacheMB:      16,
	}
}

// Validate reports every invalid key, joined; a field that code sets is
// a plain error.
func (c Config) Validate() error {
	switch {
	case c.ID == "":
		return errors.New("worker: id must be set")
	case c.BusyDelay <= 0 || c.MaxBusyDelay < c.BusyDelay:
		return errors.New("worker: busy delay: want 0 < min <= max")
	}
	var p config.Problems
	if c.Slots < 1 {
		p.Add("worker.turnsPerWorker", "must be at least 1, got %d", c.Slots)
	} else if c.FleetTurnLimit < c.Slots {
		p.Add("worker.fleetTurnLimit", "%d is below turnsPerWorker %d", c.FleetTurnLimit, c.Slots)
	}
	if time.Duration(c.AckWait) < time.Second {
		p.Add("worker.ackWaitSeconds", "must be at least 1, got %s", c.AckWait)
	}
	if c.LeaseTTL < time.Second {
		p.Add("nats.leaseTtlSeconds", "must be at least 1, got %s", c.LeaseTTL)
	}
	if c.MaxAttempts < 1 {
		p.Add("worker.maxAttempts", "must be at least 1, got %d", c.MaxAttempts)
	}
	if c.ContextWindowTokens <= c.Loop.MaxTokens {
		p.Add("agents.defaults.contextWindowTokens", "%d leaves no room beside maxTokens %d", c.ContextWindowTokens, c.Loop.MaxTokens)
	}
	if c.HistoryCacheMB < 0 {
		p.Add("worker.historyCacheMB", "must not be negative, got %d", c.HistoryCacheMB)
	}
	if c.DailyTokenBudget < 0 {
		p.Add("worker.dailyTokenBudget", "must not be negative, got %d", c.DailyTokenBudget)
	}
	for i, a := range c.MessageAllowTo {
		if !validTarget(a) {
			p.Add(fmt.Sprintf("worker.messageAllowTo[%d]", i), `want "channel:chat", "channel:*" or "*", got %q`, a)
		}
	}
	p.Join(c.Loop.Validate())
	return p.Err()
}

// inProgressEvery and renewEvery are a running turn's InProgress and
// lease renewal periods.
func (c Config) inProgressEvery() time.Duration { return time.Duration(c.AckWait) / 3 }
func (c Config) renewEvery() time.Duration      { return c.LeaseTTL / 3 }

// validTarget says whether a, an entry of worker.messageAllowTo, is
// "channel:chat", "channel:*" or "*".
func validTarget(a string) bool {
	ch, chat, ok := strings.Cut(a, ":")
	return a == "*" || (ok && ch != "" && chat != "")
}
