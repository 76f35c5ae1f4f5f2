package consolidator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// maxRounds bounds the chunks of one request.
const maxRounds = 1000

// maxMemoryAttempts bounds the compare-and-set attempts on one MEMORY.md.
const maxMemoryAttempts = 10

// update is a memory update the model computed from base.
type update struct {
	base   string
	memory string
}

// consolidate runs the protocol of the package doc for one request.
func (c *Consolidator) consolidate(ctx context.Context, m jetstream.Msg, req *nanofleetv1.ConsolidationRequest, s *slot, log *slog.Logger) (string, error) {
	key := req.GetSessionKey()
	scope, err := memory.ParseScope(req.GetScope())
	if err != nil {
		return "", err
	}
	info, _, err := c.sessions.Info(ctx, key)
	if err != nil {
		return "", err
	}
	if info.GetConsolidatedSeq() >= req.GetToSeq() {
		return "skipped", nil
	}
	l, job, err := c.leases.Take(ctx, leaseKey(key), c.cfg.ID, c.cfg.LeaseWait, func() { _ = m.InProgress() })
	if err != nil {
		return "", err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := l.Release(rctx); err != nil {
			log.Warn("release consolidation lease", "err", err)
		}
	}()
	// InProgress also covers the waits for the document lease in rounds,
	// and those in its queue after the request gave its slot back.
	stop := bus.InProgress(job, m, time.Duration(c.cfg.AckWait)/3)
	defer stop()
	return c.rounds(job, req, scope, c.holdDocument, s, log)
}

// holder holds a memory document while a round reads it, asks the model
// and writes it. It returns the context of that work, which ends if the
// hold is lost, and the function that lets go.
type holder func(ctx context.Context, scope memory.Scope, log *slog.Logger) (context.Context, func(), error)

// holdDocument takes the scope's document lease, fleet-wide, waiting up
// to Config.LeaseWait while another consolidation holds it: the model is
// then asked against the document the round will write, and its
// compare-and-set fails only if the lease was lost or another writer
// (Dream, the file sync) wrote. The caller holds its
// session's lease already (always session, then document: no cycle). The
// request's InProgress keeps running meanwhile, so nothing needs a tick.
func (c *Consolidator) holdDocument(ctx context.Context, scope memory.Scope, log *slog.Logger) (context.Context, func(), error) {
	l, job, err := c.leases.Take(ctx, documentLeaseKey(scope), c.cfg.ID, c.cfg.LeaseWait, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("memory document %s: %w", scope, err)
	}
	return job, func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := l.Release(rctx); err != nil {
			log.Warn("release memory document lease", "scope", scope.Key(), "err", err)
		}
	}, nil
}

// rounds consolidates the request's range chunk by chunk, holding the
// memory document with hold while it is read, summarised against and
// written; it relies on the conditional writes alone, the leases only keep
// others from wasting work (model calls above all). s is the request's
// pull slot, given back while the request waits in the document's queue
// (nil: none to give).
func (c *Consolidator) rounds(job context.Context, req *nanofleetv1.ConsolidationRequest, scope memory.Scope, hold holder, s *slot, log *slog.Logger) (string, error) {
	key := req.GetSessionKey()
	if s == nil {
		s = &slot{}
	}
	// Counted with the document's group, whose leaders wait for the rounds
	// running (see commit).
	c.groups.enter(scope.Key())
	defer c.groups.leave(scope.Key(), s)
	hold = c.groups.holding(hold)
	outcome := "skipped"
	for range maxRounds {
		if job.Err() != nil {
			return "", context.Cause(job)
		}
		info, _, err := c.sessions.Info(job, key)
		if err != nil {
			return "", err
		}
		cursor := info.GetConsolidatedSeq()
		if cursor >= req.GetToSeq() {
			return outcome, nil
		}
		last, err := c.hist.Last(job, key)
		if err != nil {
			return "", err
		}
		if last != nil && last.GetToSeq() > cursor {
			// An earlier attempt logged this entry and stopped: finish it.
			log.Info("finishing a logged entry", "entry", last.Seq, "to", last.GetToSeq())
			if err := c.finishHeld(job, last, req.GetPayer(), hold, log); err != nil {
				return "", err
			}
			if err := c.advance(job, key, last.GetToSeq()); err != nil {
				return "", err
			}
			if outcome == "skipped" {
				outcome = "ok"
			}
			continue
		}
		turns, err := memory.ReadTurns(job, c.d.Bus, key, cursor+1, req.GetToSeq())
		if err != nil {
			return "", err
		}
		chunk := c.chunk(turns)
		if len(chunk) == 0 {
			return outcome, c.advance(job, key, req.GetToSeq())
		}
		chunkTo := chunk[len(chunk)-1].Seq
		if !hasMessages(chunk) {
			if err := c.advance(job, key, chunkTo); err != nil {
				return "", err
			}
			continue
		}
		var expect uint64
		if last != nil {
			expect = last.Seq
		}
		e, err := c.commit(scope, &part{ctx: job, req: req, cursor: cursor, chunk: chunk, expect: expect, hold: hold, slot: s, log: log})
		if errors.Is(err, errLeaderGone) {
			continue
		}
		if err != nil {
			return "", err
		}
		if e == nil {
			log.Info("another consolidator logged this range first")
			continue
		}
		switch {
		case e.GetRaw():
			outcome = "raw"
		case outcome != "raw":
			outcome = "ok"
		}
		if err := c.advance(job, key, chunkTo); err != nil {
			return "", err
		}
		log.Info("consolidated", "entry", e.Seq, "from", e.GetFromSeq(), "to", chunkTo, "raw", e.GetRaw())
	}
	return "", fmt.Errorf("consolidation of %s did not finish in %d rounds", key, maxRounds)
}

// finishHeld is finish of an entry logged earlier, holding its document;
// a merge the model makes is counted for payer, the user of the request
// that finishes it (the entry's session's).
func (c *Consolidator) finishHeld(ctx context.Context, e *memory.Entry, payer string, hold holder, log *slog.Logger) error {
	scope, err := memory.ParseScope(e.GetScope())
	if err != nil {
		return err
	}
	job, release, err := hold(ctx, scope, log)
	if err != nil {
		return err
	}
	defer release()
	return c.finish(job, []*memory.Entry{e}, []string{payer}, nil, log)
}

// finish applies logged entries of one scope to its MEMORY.md in one
// write, each once: the document's applied markers say which were. upd is
// the model's update for all of them and the memory it saw; when the
// memory changed since (or upd is nil) the model merges each entry's turns
// into the current memory again, one by one, each merge counted for the
// entry's payer (payers[i] is es[i]'s).
func (c *Consolidator) finish(ctx context.Context, es []*memory.Entry, payers []string, upd *update, log *slog.Logger) error {
	scope, err := memory.ParseScope(es[0].GetScope())
	if err != nil {
		return err
	}
	for range maxMemoryAttempts {
		doc, rev, err := c.docs.Get(ctx, scope)
		if err != nil {
			return err
		}
		var pending []*memory.Entry
		var pendingPayers []string
		for i, e := range es {
			if memory.AppliedUpTo(doc, e.GetSessionKey()) < e.GetToSeq() {
				pending = append(pending, e)
				pendingPayers = append(pendingPayers, payers[i])
			}
		}
		if len(pending) == 0 {
			return nil
		}
		content := doc.GetContent()
		if upd != nil && upd.base == content {
			if upd.memory != "" {
				content = upd.memory
			}
		} else {
			base := content
			for i, e := range pending {
				if e.GetRaw() {
					continue // nothing learned: the turns are in the log as they were
				}
				merged, err := c.merge(ctx, e, content, pendingPayers[i], log)
				if err != nil {
					return err
				}
				if merged != "" {
					content = merged
				}
			}
			upd = &update{base: base, memory: content}
		}
		applied := make([]*nanofleetv1.HistoryEntry, len(pending))
		for i, e := range pending {
			applied[i] = e.HistoryEntry
		}
		_, err = c.docs.Put(ctx, scope, c.nextDoc(doc, content, applied), rev)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, memory.ErrTooLarge) && content != doc.GetContent():
			// A merged memory the bus refuses can never be written: the
			// entries are applied to memory as it is, as when the model
			// fails to merge (their turns are in the log), and the model
			// is not asked again.
			log.Warn("memory update larger than the bus accepts; memory kept, the turns are in the history log", "scope", scope.Key(), "err", oneLine(err))
			upd = &update{base: doc.GetContent()}
		case !errors.Is(err, memory.ErrConflict):
			return err
		}
	}
	return fmt.Errorf("%w: %s", ErrContention, scope)
}

// nextDoc is doc with content as MEMORY.md and entries applied: each one
// among the recent entries, with its applied marker.
func (c *Consolidator) nextDoc(doc *nanofleetv1.MemoryDoc, content string, entries []*nanofleetv1.HistoryEntry) *nanofleetv1.MemoryDoc {
	next := proto.Clone(doc).(*nanofleetv1.MemoryDoc)
	next.Content = content
	next.UpdatedAt = timestamppb.Now()
	next.UpdatedBy = "consolidation"
	for _, e := range entries {
		memory.PushRecent(next, e, c.cfg.RecentEntries, c.cfg.RecentChars)
		memory.MarkApplied(next, e.GetSessionKey(), e.GetToSeq(), time.Now(), c.cfg.AppliedTTL)
	}
	return next
}

// merge asks the model to fold an entry's turns into memory, counting
// the call for payer; "" means leave memory as it is.
func (c *Consolidator) merge(ctx context.Context, e *memory.Entry, current, payer string, log *slog.Logger) (string, error) {
	turns, err := memory.ReadTurns(ctx, c.d.Bus, e.GetSessionKey(), e.GetFromSeq(), e.GetToSeq())
	if err != nil {
		return "", err
	}
	res, err := summarise(ctx, c.d.Model, c.cfg, current, memory.Transcript(turns, c.cfg.ToolChars))
	c.charge(ctx, res.Usage, []share{{payer: payer, weight: 1}}, log)
	if err != nil {
		if ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		log.Warn("model failed merging into memory; memory kept, the turns are in the history log", "err", oneLine(err))
		return "", nil
	}
	return res.Memory, nil
}

// advance moves the session's cursor forward to seq, never backward.
func (c *Consolidator) advance(ctx context.Context, key string, seq uint64) error {
	_, err := c.sessions.UpdateInfo(ctx, key, func(i *nanofleetv1.SessionInfo) {
		if i.GetConsolidatedSeq() < seq {
			i.ConsolidatedSeq = seq
		}
	})
	return err
}

// chunk returns the oldest turns that fit Config.ChunkTokens (at least
// one).
func (c *Consolidator) chunk(turns []session.Turn) []session.Turn {
	total := 0
	for i, t := range turns {
		total += memory.EstimateTurn(t)
		if total > c.cfg.ChunkTokens && i > 0 {
			return turns[:i]
		}
	}
	return turns
}

func hasMessages(turns []session.Turn) bool {
	for _, t := range turns {
		for _, m := range t.Record.GetMessages() {
			if m.GetContent() != "" || len(m.GetToolCalls()) > 0 {
				return true
			}
		}
	}
	return false
}
