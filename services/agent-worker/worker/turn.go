package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/lease"
	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/pkg/metakey"
	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/subject"
	"github.com/nanofleet/nanofleet/pkg/textcut"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/agent"
)

// turn is one inbound message being turned into a committed turn.
type turn struct {
	w    *Worker
	msg  jetstream.Msg
	meta *jetstream.MsgMetadata
	in   *nanofleetv1.InboundMessage
	key  string
	id   string
	log  *slog.Logger
	// state is what the turn has produced so far.
	state state
}

// SessionKey returns the session an inbound message belongs to.
func SessionKey(in *nanofleetv1.InboundMessage) string {
	if k := in.GetSessionKey(); k != "" {
		return k
	}
	return session.Key(in.GetChannel(), in.GetChatId())
}

// handle runs the protocol of the package doc for one message.
func (w *Worker) handle(ctx context.Context, m jetstream.Msg) {
	start := time.Now()
	meta, err := m.Metadata()
	if err != nil {
		w.log.Error("inbound message without metadata", "err", err)
		_ = m.Term()
		return
	}
	in := &nanofleetv1.InboundMessage{}
	if err := proto.Unmarshal(m.Data(), in); err != nil {
		w.deadLetter(ctx, m, meta, fmt.Sprintf("malformed InboundMessage: %v", err), true)
		return
	}
	if in.GetChannel() == "" || in.GetChatId() == "" {
		w.deadLetter(ctx, m, meta, "InboundMessage without channel or chat_id", true)
		return
	}
	t := &turn{w: w, msg: m, meta: meta, in: in, key: SessionKey(in), id: turnID(meta.Sequence.Stream)}
	t.log = w.log.With("session", t.key, "turn", t.id)
	if meta.NumDelivered > 1 && w.d.Observer.Redelivered != nil {
		w.d.Observer.Redelivered()
	}
	if isCommand(in.GetContent(), "/stop") {
		// Reach the running turn now, not when this message's turn comes.
		if err := RequestStop(w.d.Bus.NC, w.d.Bus.Space, t.key, in.GetSenderId(), meta.Sequence.Stream); err != nil {
			t.log.Warn("request stop", "err", err)
		}
	}
	outcome := t.run(ctx)
	if w.d.Observer.TurnDone != nil && outcome != "" {
		w.d.Observer.TurnDone(outcome, time.Since(start))
	}
}

// run returns the turn's outcome for metrics, or "" when it only waited.
func (t *turn) run(ctx context.Context) string {
	w := t.w
	if oldest, err := t.oldest(ctx); err != nil || !oldest {
		if err != nil {
			w.fifoWarn.Warn("fifo check", "session", t.key, "turn", t.id, "err", err)
		}
		t.busy(ctx)
		return ""
	}
	if !w.claim(ctx, t.key, t.meta.Sequence.Stream) {
		t.busy(ctx)
		return ""
	}
	l, err := w.leases.Acquire(ctx, subject.Token(t.key), leaseOwner(w.cfg.ID, t.meta.Sequence.Stream))
	if err != nil {
		w.unclaim(t.key)
		if errors.Is(err, lease.ErrHeld) {
			if w.d.Observer.LeaseContention != nil {
				w.d.Observer.LeaseContention()
			}
		} else {
			t.log.Warn("acquire lease", "err", err)
		}
		t.busy(ctx)
		return ""
	}
	outcome := t.held(ctx, l)
	t.settle(context.WithoutCancel(ctx))
	return outcome
}

// held runs the turn while it holds the session, and lets the session go
// when the turn ends.
func (t *turn) held(ctx context.Context, l *lease.Lease) string {
	turnCtx, cancel := context.WithTimeoutCause(ctx, time.Duration(t.w.cfg.TurnTimeout), errTurnTimeout)
	defer cancel()
	turnCtx, h := t.hold(turnCtx, l)
	defer func() { h.release(ctx, t.state.leaseKept()) }()
	outcome, err := t.execute(turnCtx)
	if err != nil {
		abandoned := errors.Is(context.Cause(turnCtx), errLeaseLost) || ctx.Err() != nil
		// No InProgress after the nak below: it would put the
		// redelivery off to the whole ack wait.
		h.quiet()
		if abandoned {
			// Someone else may run it now, or we are shutting down hard:
			// leave it to a redelivery, which resumes from the checkpoint.
			t.log.Warn("turn abandoned", "err", err)
			// With a delay, however short, the server writes the
			// redelivery time into the consumer's state; a plain Nak
			// is lost when the server restarts (the all-in-one
			// stopping), and the turn then waited out its whole ack
			// wait at the next start.
			t.putBack(ctx, time.Millisecond)
			return "abandoned"
		}
		if bus.TooLarge(err) {
			// Even the cut-down record was refused: never retried.
			t.w.deadLetter(ctx, t.msg, t.meta, "turn too large to store: "+err.Error(), true)
			return "dead_letter"
		}
		// Mostly the bus itself (a stream leader election after a server
		// restart takes seconds): back off so that the attempts a message
		// has are not all spent during one outage: 2, 4, 8… s (at most
		// 30 s), jittered so that the turns one outage failed do not all
		// come back at once. Counted in starts, not deliveries: each
		// wait for the session (FIFO, lease) is a delivery too, and
		// during an election a turn's second failure waited 20–27 s.
		delay := backoff.Backoff{Min: 2 * time.Second, Max: 30 * time.Second}.Wait(max(t.state.startCount()-1, 0))
		t.log.Error("turn failed; will retry", "err", err, "after", delay)
		// The node that failed the turn often led the workers' consumer
		// too: putBack's nak waits for its successor.
		t.putBack(ctx, delay)
		return "failed"
	}
	return outcome
}

// execute runs the turn under the lease and commits it.
func (t *turn) execute(ctx context.Context) (string, error) {
	w := t.w
	cmd, isCmd := parseCommand(t.in.GetContent(), w.d.Commands)
	// The memory text is read while the session is: the two are
	// independent, and each costs a round trip. Commands do not prompt the
	// model and need none.
	var memory <-chan string
	if !isCmd {
		memory = t.readMemory(ctx)
	}
	info, _, err := w.sessions.Info(ctx, t.key)
	if err != nil {
		return "", err
	}
	hist, err := w.sessions.LoadHistory(ctx, t.key, info.GetConsolidatedSeq())
	if err != nil {
		return "", err
	}
	if rec := hist.Find(t.meta.Sequence.Stream); rec != nil {
		// Committed before a crash or a lost ack: deliver the same replies.
		if err := t.publish(ctx, rec.GetReplies()); err != nil {
			return "", err
		}
		_ = t.msg.Ack()
		return "replayed", nil
	}

	cp, err := t.loadCheckpoint(ctx)
	if err != nil {
		return "", err
	}
	t.state.started(int(cp.Attempts))
	if int(cp.Attempts) > w.cfg.MaxAttempts {
		return t.giveUp(ctx, hist, fmt.Sprintf("turn started %d times without finishing", cp.Attempts-1))
	}
	if err := t.resume(ctx, cp); err != nil {
		return "", err
	}

	if isCmd {
		return t.command(ctx, cmd, info, hist)
	}

	tokenLimit := 0
	if w.budget != nil {
		spent, err := w.budget.spent(ctx, t.in)
		if err != nil {
			return "", err
		}
		// What is left bounds this turn too, not only the next.
		tokenLimit = int(w.budget.limit - spent)
		if spent >= w.budget.limit {
			t.reply(nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, w.budget.spentText(spent))
			if err := t.commit(context.WithoutCancel(ctx), hist, &nanofleetv1.TurnRecord{Messages: cp.Messages}, nil); err != nil {
				return "", err
			}
			return "budget_spent", nil
		}
	}

	ctx, done := t.stoppable(ctx)
	defer done()
	res, runErr := t.think(ctx, cp, info, hist, memory, tokenLimit)
	outcome := "ok"
	switch {
	case runErr == nil:
		if !t.state.answered() {
			t.reply(nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, res.Final)
		}
	case errors.Is(context.Cause(ctx), errStopped):
		outcome = "stopped"
		t.reply(nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, "⏹ Stopped.")
	case ctx.Err() != nil && !errors.Is(context.Cause(ctx), errTurnTimeout):
		// Cut off by shutdown or a lost lease, not by the model: leave the
		// message to a redelivery, which resumes from the checkpoint.
		return "", runErr
	case bus.TooLarge(runErr):
		// A checkpoint the store refuses for its size: every attempt
		// would end the same way.
		return t.tooLarge(context.WithoutCancel(ctx), hist, runErr)
	case errors.Is(runErr, agent.ErrModel):
		outcome = "model_error"
		t.log.Warn("model failed", "err", runErr)
		t.reply(nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR, modelFailure(runErr))
	default:
		return "", runErr
	}
	rec := &nanofleetv1.TurnRecord{Messages: cp.Messages}
	if res != nil {
		rec.Messages, rec.Usage = res.Messages, usageOf(res)
	}
	if err := t.commit(context.WithoutCancel(ctx), hist, rec, info); err != nil {
		if bus.TooLarge(err) {
			return t.tooLarge(context.WithoutCancel(ctx), hist, err)
		}
		return "", err
	}
	return outcome, nil
}

// usageOf is the run's token usage as recorded, nil when it called no
// model.
func usageOf(res *agent.Result) *nanofleetv1.TokenUsage {
	if res.ModelCalls == 0 {
		return nil
	}
	u := res.Usage
	return &nanofleetv1.TokenUsage{
		PromptTokens: int64(u.PromptTokens), CompletionTokens: int64(u.CompletionTokens),
		CachedTokens: int64(u.CachedTokens), ReasoningTokens: int64(u.ReasoningTokens),
		ModelCalls: int32(res.ModelCalls), Model: res.Model,
	}
}

// think builds the prompt and runs the model/tool loop.
func (t *turn) think(ctx context.Context, cp *nanofleetv1.TurnCheckpoint, info *nanofleetv1.SessionInfo, hist *session.History, memory <-chan string, tokenLimit int) (*agent.Result, error) {
	w := t.w
	var memText string
	select {
	case memText = <-memory:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	model := w.cfg.Model
	if info.GetModel() != "" {
		model = info.GetModel()
	}
	promptMsgs := t.buildPrompt(hist, memText)
	tools := w.catalog.forTurn(ctx, t)
	hooks := agent.Hooks{
		Progress: func(s string) { t.live(nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS, s) },
		ToolHint: func(s string) { t.live(nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT, s) },
		Checkpoint: func(ctx context.Context, msgs []*nanofleetv1.ChatMessage, iter int) error {
			return t.checkpoint(ctx, cp, msgs, iter)
		},
	}
	if t.in.GetMetadata()[metakey.Stream] == "true" {
		hooks.Delta = func(s string) {
			t.state.delta()
			t.live(nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA, s)
		}
	}
	return w.loop.Run(ctx, agent.Turn{Model: model, Prompt: promptMsgs, Messages: cp.Messages, Iteration: int(cp.Iteration), TokenLimit: tokenLimit}, tools, hooks)
}

// readMemory starts reading the turn's long-term memory text; the channel
// yields it ("" without memory or when it cannot be read) once.
func (t *turn) readMemory(ctx context.Context) <-chan string {
	out := make(chan string, 1)
	if t.w.d.Memory == nil {
		out <- ""
		return out
	}
	go func() {
		text, err := t.w.d.Memory.Context(ctx, t.in, t.key)
		if err != nil {
			t.log.Warn("load memory", "err", err)
		}
		out <- text
	}()
	return out
}

// historyBudget is the token budget of system prompt plus history.
func (t *turn) historyBudget() int {
	return t.w.cfg.ContextWindowTokens - t.w.cfg.Loop.MaxTokens
}

// fitUser cuts a user message that alone would take more than half of the
// context budget, with a note the model reads: the system prompt, the
// history and the answer must fit beside it, and a prompt above the
// model's window fails at the provider on every attempt.
func (t *turn) fitUser(m *nanofleetv1.ChatMessage) *nanofleetv1.ChatMessage {
	limit := t.historyBudget() / 2 * 4 // bytes: the estimates count 4 a token
	c := m.GetContent()
	if len(c) <= limit {
		return m
	}
	kept := textcut.Prefix(c, limit)
	m.Content = kept + fmt.Sprintf("\n\n[nanofleet: the message was cut here. It had %d bytes (about %d tokens); only the first %d fit in the context window of %d tokens. Tell the user that the rest was not read.]",
		len(c), len(c)/4, len(kept), t.w.cfg.ContextWindowTokens)
	return m
}

func userMessage(in *nanofleetv1.InboundMessage) *nanofleetv1.ChatMessage {
	return &nanofleetv1.ChatMessage{Role: "user", Content: in.GetContent(), Media: in.GetMedia(), CreatedAt: in.GetReceivedAt()}
}

// modelFailure is the reply to a turn the model failed: "try again" only
// where trying again may help.
func modelFailure(err error) string {
	next := "Please try again in a moment."
	if !llm.Temporary(err) {
		next = "Trying again will not help until that is fixed."
	}
	return "Sorry, I could not get an answer from the model (" + shortError(err) + "). " + next
}

func shortError(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i > 0 && len(s) > 160 {
		s = s[i+2:]
	}
	return textcut.Clip(s, 160) // on a character boundary: proto refuses half a one
}
