package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/lease"
	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/subject"
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
	// replies are the turn's durable replies, in order.
	replies []*nanofleetv1.OutboundMessage
	// messaged is set when the message tool already answered the origin
	// chat, so the final answer is not sent twice.
	messaged bool
	// release frees the session's lease and local claim.
	release func()
	// holdLease keeps the lease past the turn: its replies are not out.
	holdLease bool
	// checkpointRev is the revision of the turn's newest checkpoint, which
	// commit clears unless a newer turn has replaced it.
	checkpointRev uint64
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
		w.d.Log.Error("inbound message without metadata", "err", err)
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
	t := &turn{w: w, msg: m, meta: meta, in: in, key: SessionKey(in), id: "in" + strconv.FormatUint(meta.Sequence.Stream, 10)}
	t.log = w.d.Log.With("session", t.key, "turn", t.id)
	if meta.NumDelivered > 1 && w.d.Observer.Redelivered != nil {
		w.d.Observer.Redelivered()
	}
	if isCommand(in.GetContent(), "/stop") {
		// Reach the running turn now, not when this message's turn comes.
		if err := RequestStop(w.d.Bus.NC, w.d.Bus.Space, t.key, in.GetSenderId()); err != nil {
			t.log.Warn("request stop", "err", err)
		}
	}
	outcome := t.run(ctx)
	if w.d.Observer.TurnDone != nil && outcome != "" {
		w.d.Observer.TurnDone(outcome, time.Since(start))
	}
}

// localTurn is a turn running in this worker.
type localTurn struct {
	cancel context.CancelCauseFunc // set once the turn has its lease
	done   chan struct{}
}

// localWait is how long a message waits in this worker for the same
// session's turn, running here, to finish: a reply is often answered at
// once, and waiting here is cheaper than a redelivery.
const localWait = 200 * time.Millisecond

// claim marks the session as running in this worker. If it already runs
// here, claim waits up to localWait for it to end; false means busy. The
// same message redelivered to this worker must not run twice, whatever
// the lease says.
func (w *Worker) claim(ctx context.Context, key string) bool {
	deadline := time.NewTimer(localWait)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		lt, ok := w.running[key]
		if !ok {
			w.running[key] = &localTurn{done: make(chan struct{})}
			w.mu.Unlock()
			return true
		}
		w.mu.Unlock()
		select {
		case <-lt.done:
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

func (w *Worker) unclaim(key string) {
	w.mu.Lock()
	if lt, ok := w.running[key]; ok {
		delete(w.running, key)
		close(lt.done)
	}
	w.mu.Unlock()
}

// busy puts the message back to wait for its session.
func (t *turn) busy() {
	d := t.w.cfg.BusyDelay
	for i := uint64(1); i < t.meta.NumDelivered && d < t.w.cfg.MaxBusyDelay; i++ {
		d *= 2
	}
	_ = t.msg.NakWithDelay(min(d, t.w.cfg.MaxBusyDelay))
}

// run returns the turn's outcome for metrics, or "" when it only waited.
func (t *turn) run(ctx context.Context) string {
	w := t.w
	if oldest, err := t.oldest(ctx); err != nil || !oldest {
		if err != nil {
			t.log.Warn("fifo check", "err", err)
		}
		t.busy()
		return ""
	}
	if !w.claim(ctx, t.key) {
		t.busy()
		return ""
	}
	// The owner names the worker and the message, so a worker restarted
	// under its old id takes over the lease of the very turn it was running.
	l, err := w.leases.Acquire(ctx, subject.Token(t.key), w.cfg.ID+"/"+strconv.FormatUint(t.meta.Sequence.Stream, 10))
	if err != nil {
		w.unclaim(t.key)
		if errors.Is(err, lease.ErrHeld) {
			if w.d.Observer.LeaseContention != nil {
				w.d.Observer.LeaseContention()
			}
		} else {
			t.log.Warn("acquire lease", "err", err)
		}
		t.busy()
		return ""
	}
	turnCtx, cancel := context.WithTimeoutCause(ctx, time.Duration(w.cfg.TurnTimeout), errTurnTimeout)
	turnCtx, stop := context.WithCancelCause(turnCtx)
	defer cancel()
	w.mu.Lock()
	w.running[t.key].cancel = stop
	w.mu.Unlock()
	renewDone := make(chan struct{})
	go t.keepAlive(turnCtx, l, stop, renewDone)
	// release frees the session for its next message: called by commit as
	// soon as the replies are out, and in any case when the turn ends.
	t.release = sync.OnceFunc(func() {
		stop(nil)
		<-renewDone
		// Released with a fresh context: a stopped turn still frees its session.
		if !t.holdLease {
			relCtx, relCancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer relCancel()
			if err := l.Release(relCtx); err != nil {
				t.log.Warn("release lease", "err", err)
			}
		}
		w.unclaim(t.key)
	})
	defer t.release()
	outcome, err := t.execute(turnCtx)
	if err != nil {
		if errors.Is(context.Cause(turnCtx), errLeaseLost) || ctx.Err() != nil {
			// Someone else may run it now, or we are shutting down hard:
			// leave it to a redelivery, which resumes from the checkpoint.
			t.log.Warn("turn abandoned", "err", err)
			_ = t.msg.Nak()
			return "abandoned"
		}
		if bus.TooLarge(err) {
			// Even the cut-down record was refused: never retried.
			t.w.deadLetter(ctx, t.msg, t.meta, "turn too large to store: "+err.Error(), true)
			return "dead_letter"
		}
		// Mostly the bus itself (a stream leader election after a server
		// restart takes seconds): back off so that the attempts a message
		// has are not all spent during one outage.
		delay := min(time.Second<<min(t.meta.NumDelivered, 5), 30*time.Second)
		t.log.Error("turn failed; will retry", "err", err, "after", delay)
		_ = t.msg.NakWithDelay(delay)
		return "failed"
	}
	return outcome
}

// oldest is the FIFO guard: only the oldest message still in the inbound
// stream on the subject may run. A message older than ours whose turn is
// already committed (its ack still on its way to the server) does not
// count: without that, a client answering the reply at once would find its
// next message nak'ed behind an ack in flight.
func (t *turn) oldest(ctx context.Context) (bool, error) {
	st, subj, ours := t.w.inbound, t.msg.Subject(), t.meta.Sequence.Stream
	first, err := st.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subj))
	if err != nil {
		return false, err
	}
	if first.Sequence == ours {
		return true, nil
	}
	last, err := t.w.sessions.LastTurn(ctx, t.key)
	if err != nil || last.GetInboundSeq() != first.Sequence {
		return false, err
	}
	// Committed is not answered: an append that timed out may have been
	// stored while its turn failed, before its replies went out.
	if out, err := t.repliesOut(ctx, last); err != nil || !out {
		return false, err
	}
	next, err := st.GetMsg(ctx, first.Sequence+1, jetstream.WithGetMsgSubject(subj))
	if err != nil {
		return false, err
	}
	return next.Sequence == ours, nil
}

// repliesOut reports whether a committed turn's last reply is the newest
// message of its chat in the outbound stream. Anything else there (a
// follower behind its leader, another session writing to the chat) reads
// as not out: the caller waits, and the turn's ack or redelivery settles it.
func (t *turn) repliesOut(ctx context.Context, rec *nanofleetv1.TurnRecord) (bool, error) {
	replies := rec.GetReplies()
	if len(replies) == 0 {
		return true, nil
	}
	want := replies[len(replies)-1]
	sp := t.w.d.Bus.Space
	m, ok, err := t.w.d.Bus.Direct.Last(ctx, sp.OutboundStream(), sp.Outbound(want.GetChannel(), want.GetChatId()))
	if err != nil || !ok {
		return false, err
	}
	// Replies are published with their id as Nats-Msg-Id (publishReplies).
	return m.Header.Get(nats.MsgIdHdr) == want.GetId(), nil
}

// keepAlive renews the lease and the message's ack deadline until ctx
// ends; if the lease is lost it stops the turn.
func (t *turn) keepAlive(ctx context.Context, l *lease.Lease, stop context.CancelCauseFunc, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(t.w.cfg.renewEvery())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := l.Renew(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			t.log.Warn("lease renewal failed; aborting turn", "err", err)
			stop(errLeaseLost)
			return
		}
		_ = t.msg.InProgress()
	}
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
		t.replies = rec.GetReplies()
		if err := t.publishReplies(ctx); err != nil {
			return "", err
		}
		_ = t.msg.Ack()
		return "replayed", nil
	}

	cp := &nanofleetv1.TurnCheckpoint{TurnId: t.id, InboundSeq: t.meta.Sequence.Stream}
	if t.meta.NumDelivered > 1 {
		if old, _, err := w.sessions.Checkpoint(ctx, t.key); err == nil && old.GetInboundSeq() == cp.InboundSeq {
			cp = old
		} else if err != nil && !errors.Is(err, session.ErrNotFound) {
			return "", err
		}
	}
	cp.Attempts++
	if int(cp.Attempts) > w.cfg.MaxAttempts {
		return t.giveUp(ctx, hist, fmt.Sprintf("turn started %d times without finishing", cp.Attempts-1))
	}
	if len(cp.Messages) == 0 {
		cp.Messages = []*nanofleetv1.ChatMessage{t.fitUser(userMessage(t.in))}
	}
	// A first delivery has nothing to resume, so its checkpoint waits for
	// the turn's first step (most turns answer without one and never
	// write it). A redelivery records its start before it runs: that is
	// what counts the attempts of a message that kills its worker.
	if t.meta.NumDelivered > 1 {
		if t.checkpointRev, err = w.sessions.SaveCheckpoint(ctx, t.key, cp); err != nil {
			return "", err
		}
	}
	t.replies = cp.GetReplies()

	if isCmd {
		return t.command(ctx, cmd, info, hist)
	}

	if w.budget != nil {
		spent, err := w.budget.spent(ctx, t.in)
		if err != nil {
			return "", err
		}
		if spent >= w.budget.limit {
			t.reply(nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, w.budget.spentText(spent))
			if err := t.commit(context.WithoutCancel(ctx), hist, &nanofleetv1.TurnRecord{Messages: cp.Messages}); err != nil {
				return "", err
			}
			return "budget_spent", nil
		}
	}

	res, runErr := t.think(ctx, cp, info, hist, memory)
	outcome := "ok"
	switch {
	case runErr == nil:
		if !t.messaged {
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
		t.reply(nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR,
			"Sorry, I could not get an answer from the model ("+shortError(runErr)+"). Please try again in a moment.")
	default:
		return "", runErr
	}
	rec := &nanofleetv1.TurnRecord{Messages: cp.Messages}
	if res != nil {
		rec.Messages, rec.Usage = res.Messages, usageOf(res)
	}
	if err := t.commit(context.WithoutCancel(ctx), hist, rec); err != nil {
		if bus.TooLarge(err) {
			return t.tooLarge(context.WithoutCancel(ctx), hist, err)
		}
		return "", err
	}
	if w.budget != nil && rec.Usage != nil {
		if err := w.budget.add(context.WithoutCancel(ctx), t.in, rec.Usage); err != nil {
			t.log.Warn("token budget: turn not counted", "err", err)
		}
	}
	if w.d.Memory != nil {
		if err := w.d.Memory.AfterTurn(context.WithoutCancel(ctx), t.in, t.key, info, hist, t.historyBudget()); err != nil {
			t.log.Warn("memory after turn", "err", err)
		}
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
func (t *turn) think(ctx context.Context, cp *nanofleetv1.TurnCheckpoint, info *nanofleetv1.SessionInfo, hist *session.History, memory <-chan string) (*agent.Result, error) {
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
			cp.Messages, cp.Iteration, cp.Replies = msgs, int32(iter), t.replies
			rev, err := w.sessions.SaveCheckpoint(ctx, t.key, cp)
			if err == nil {
				t.checkpointRev = rev
			}
			return err
		},
	}
	if t.in.GetMetadata()["stream"] == "true" {
		hooks.Delta = func(s string) { t.live(nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA, s) }
	}
	return w.loop.Run(ctx, agent.Turn{Model: model, Prompt: promptMsgs, Messages: cp.Messages, Iteration: int(cp.Iteration)}, tools, hooks)
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

// reply adds a durable reply to the origin chat.
func (t *turn) reply(kind nanofleetv1.OutboundKind, text string) {
	t.replies = append(t.replies, t.outbound(kind, t.in.GetChannel(), t.in.GetChatId(), text))
}

func (t *turn) outbound(kind nanofleetv1.OutboundKind, channel, chatID, text string) *nanofleetv1.OutboundMessage {
	out := &nanofleetv1.OutboundMessage{
		Channel: channel, ChatId: chatID, Content: text, Kind: kind,
		ReplyTo: t.in.GetId(), SessionKey: t.key, TurnId: t.id, CreatedAt: timestamppb.Now(),
	}
	if channel == t.in.GetChannel() && chatID == t.in.GetChatId() && len(t.in.GetMetadata()) > 0 {
		out.Metadata = t.in.GetMetadata()
	}
	return out
}

// live publishes progress, a tool hint or a delta on core NATS: shown if
// someone listens, never stored.
func (t *turn) live(kind nanofleetv1.OutboundKind, text string) {
	out := t.outbound(kind, t.in.GetChannel(), t.in.GetChatId(), text)
	data, err := proto.Marshal(out)
	if err != nil {
		return
	}
	_ = t.w.d.Bus.NC.Publish(t.w.d.Bus.Space.Live(out.GetChannel(), out.GetChatId()), data)
}

// commit appends the turn record, publishes the replies, clears the
// checkpoint and acks.
func (t *turn) commit(ctx context.Context, hist *session.History, rec *nanofleetv1.TurnRecord) error {
	w := t.w
	for i, r := range t.replies {
		r.Id = t.id + ":" + strconv.Itoa(i)
		r.LastOfTurn = i == len(t.replies)-1
		if r.LastOfTurn {
			r.Usage = rec.Usage
		}
	}
	rec.TurnId = t.id
	rec.SenderId = t.in.GetSenderId()
	rec.InboundId = t.in.GetId()
	rec.InboundSeq = t.meta.Sequence.Stream
	rec.SessionKey = t.key
	rec.Replies = t.replies
	rec.CompletedAt = timestamppb.Now()
	seq, err := w.sessions.Append(ctx, t.key, rec, hist.LastSeq)
	if errors.Is(err, session.ErrConflict) {
		// Only this turn's own earlier append can have moved the history
		// while we hold the lease; a re-read tells.
		again, lerr := w.sessions.LoadHistory(ctx, t.key, hist.LastSeq)
		if lerr != nil {
			return lerr
		}
		if again.Find(rec.InboundSeq) == nil {
			return fmt.Errorf("commit turn: %w", err)
		}
		seq = again.LastSeq
	} else if err != nil {
		return fmt.Errorf("commit turn: %w", err)
	}
	hist.Turns = append(hist.Turns, session.Turn{Seq: seq, Record: rec})
	hist.LastSeq = seq
	if err := t.publishReplies(ctx); err != nil {
		// The turn is in the history, so the FIFO guard would let the
		// session's next message run; its reply must not overtake ours.
		// Keep the lease until it expires or this message's redelivery
		// takes it over and republishes the replies.
		t.holdLease = true
		return err
	}
	// The turn is durable and answered. The ack goes out first: the
	// session's next message, often published the moment our reply
	// arrived, then usually finds itself the oldest in the stream, and the
	// FIFO guard needs one request instead of three. Then the session is
	// let go while the bookkeeping below finishes.
	if err := t.msg.Ack(); err != nil {
		t.log.Warn("ack", "err", err)
	}
	if t.release != nil {
		t.release()
	}
	if t.checkpointRev != 0 {
		if err := w.sessions.ClearCheckpoint(ctx, t.key, t.checkpointRev); err != nil {
			t.log.Warn("clear checkpoint", "err", err)
		}
	}
	return nil
}

func (t *turn) publishReplies(ctx context.Context) error {
	for _, r := range t.replies {
		data, err := proto.Marshal(r)
		if err != nil {
			return fmt.Errorf("encode reply: %w", err)
		}
		m := nats.NewMsg(t.w.d.Bus.Space.Outbound(r.GetChannel(), r.GetChatId()))
		m.Data = data
		m.Header.Set(nats.MsgIdHdr, r.GetId())
		pctx, cancel := context.WithTimeout(ctx, bus.CallTimeout)
		_, err = t.w.d.Bus.JS.PublishMsg(pctx, m)
		cancel()
		if err != nil {
			return fmt.Errorf("publish reply %s: %w", r.GetId(), err)
		}
	}
	return nil
}

// giveUp dead-letters a message whose turn keeps dying, and tells the user.
func (t *turn) giveUp(ctx context.Context, hist *session.History, reason string) (string, error) {
	t.w.deadLetter(ctx, t.msg, t.meta, reason, false)
	t.reply(nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR, "Sorry, I could not process your message: it failed repeatedly and was set aside for an operator.")
	rec := &nanofleetv1.TurnRecord{Messages: []*nanofleetv1.ChatMessage{t.fitUser(userMessage(t.in))}}
	if err := t.commit(ctx, hist, rec); err != nil {
		return "", err
	}
	return "dead_letter", nil
}

// tooLargeKeep bounds the user's message in the record of a turn that was
// too large to store.
const tooLargeKeep = 64 << 10

// tooLarge ends a turn whose record or checkpoint the store refuses for
// its size. That is deterministic, so unlike other bus failures it is not
// retried (each retry would call the model again with the same prompt):
// the message is dead-lettered at once, the user told, and the record
// keeps only the start of the user's message.
func (t *turn) tooLarge(ctx context.Context, hist *session.History, cause error) (string, error) {
	t.log.Warn("turn too large to store; set aside without retry", "err", cause)
	t.w.deadLetter(ctx, t.msg, t.meta, "turn too large to store: "+cause.Error(), false)
	t.replies = nil
	t.reply(nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR,
		"Sorry, this turn produced more than the fleet can store ("+shortError(cause)+"), so it was set aside. Please ask for less at once.")
	um := userMessage(t.in)
	if c := um.GetContent(); len(c) > tooLargeKeep {
		um.Content = cutUTF8(c, tooLargeKeep) + fmt.Sprintf("\n\n[nanofleet: cut from %d bytes; the turn was too large to store]", len(c))
	}
	um.Media = nil
	if err := t.commit(ctx, hist, &nanofleetv1.TurnRecord{Messages: []*nanofleetv1.ChatMessage{um}}); err != nil {
		return "", err
	}
	return "dead_letter", nil
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
	kept := cutUTF8(c, limit)
	m.Content = kept + fmt.Sprintf("\n\n[nanofleet: the message was cut here. It had %d bytes (about %d tokens); only the first %d fit in the context window of %d tokens. Tell the user that the rest was not read.]",
		len(c), len(c)/4, len(kept), t.w.cfg.ContextWindowTokens)
	return m
}

// cutUTF8 returns at most n bytes of s, not splitting a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// deadLetter stores the message with its reason. With terminate it also
// ends the message's deliveries; otherwise the caller commits and acks it.
func (w *Worker) deadLetter(ctx context.Context, m jetstream.Msg, meta *jetstream.MsgMetadata, reason string, terminate bool) {
	err := w.d.Bus.DeadLetter(ctx, "inbound", bus.Letter{
		Subject: m.Subject(), Data: m.Data(), Header: m.Headers(),
		StreamSeq: meta.Sequence.Stream, Deliveries: meta.NumDelivered, Reason: reason,
	})
	if err != nil {
		w.d.Log.Error("dead-letter inbound", "err", err)
		if terminate {
			_ = m.NakWithDelay(time.Second)
		}
		return
	}
	w.d.Log.Warn("inbound message dead-lettered", "subject", m.Subject(), "seq", meta.Sequence.Stream, "reason", reason)
	if w.d.Observer.DeadLettered != nil {
		w.d.Observer.DeadLettered("inbound")
	}
	if terminate {
		_ = m.Term()
	}
}

func userMessage(in *nanofleetv1.InboundMessage) *nanofleetv1.ChatMessage {
	return &nanofleetv1.ChatMessage{Role: "user", Content: in.GetContent(), Media: in.GetMedia(), CreatedAt: in.GetReceivedAt()}
}

func shortError(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i > 0 && len(s) > 160 {
		s = s[i+2:]
	}
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}
