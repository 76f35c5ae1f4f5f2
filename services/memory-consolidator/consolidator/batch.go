package consolidator

import (
	"context"
	"errors"
	"log/slog"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// batchChunks bounds a batch's turns to this many Config.ChunkTokens. A
// chunk is at most ChunkTokens, the operator's size of one call's
// conversation; three of them keep a batched prompt within three single
// prompts (72,000 tokens at the default: a 128k window keeps room for
// MEMORY.md and the answer), and smaller chunks batch up to
// Config.BatchMax.
const batchChunks = 3

// errLeaderGone tells a waiting round that the round leading its batch
// stopped (its own job ended) before the batch was done: nothing of the
// waiter's part is known to be finished, and it looks again.
var errLeaderGone = errors.New("consolidator: the round leading the batch stopped")

// part is one round's work handed to its document's group: the chunk of a
// session's turns after cursor, to be logged after the session's entry
// expect.
type part struct {
	// ctx is the round's job: a waiter leaves the queue when it ends.
	ctx    context.Context
	req    *nanofleetv1.ConsolidationRequest
	cursor uint64
	chunk  []session.Turn
	tokens int
	expect uint64
	hold   holder
	slot   *slot
	log    *slog.Logger

	// state is guarded by groups.mu.
	state partState
	// lead is closed when the part is to lead the next batch.
	lead chan struct{}
	// done gets the part's result; buffered, so a leader never blocks on
	// a waiter that left.
	done chan partResult
}

type partState int

const (
	queued  partState = iota // waiting in its group's queue
	leading                  // leads a batch
	taken                    // in a batch another part leads
)

// partResult is what became of a part: its logged entry, or nil when
// another consolidator logged the range first.
type partResult struct {
	entry *memory.Entry
	err   error
}

// commit hands the round's chunk p to the document's group and returns
// its entry once a batch logged and applied it (nil: another consolidator
// logged the range first). The round leads the batch if no round of this
// process leads the document, else it waits, under its own context, to be
// taken into a batch or to lead the next one.
func (c *Consolidator) commit(scope memory.Scope, p *part) (*memory.Entry, error) {
	p.tokens = tokens(p.chunk)
	p.lead, p.done = make(chan struct{}), make(chan partResult, 1)
	gs := c.groups
	key := scope.Key()
	gs.mu.Lock()
	g, busy := gs.docs[key]
	if !busy {
		g = &group{}
		gs.docs[key] = g
		p.state = leading
		gs.mu.Unlock()
		return c.lead(scope, g, p)
	}
	p.state = queued
	g.queue = append(g.queue, p)
	gs.giveBack(key, p.slot, c.cfg.BatchMax, c.cfg.Slots*c.cfg.BatchMax)
	gs.notify()
	gs.mu.Unlock()
	select {
	case r := <-p.done:
		return r.entry, r.err
	case <-p.lead:
		return c.lead(scope, g, p)
	case <-p.ctx.Done():
	}
	gs.mu.Lock()
	switch p.state {
	case queued:
		g.queue = removePart(g.queue, p)
		gs.mu.Unlock()
	case leading:
		// Made leader as the context ended: the next one leads.
		gs.mu.Unlock()
		c.handOff(key, g)
	default:
		// A batch has the part; its result goes unread.
		gs.mu.Unlock()
	}
	return nil, context.Cause(p.ctx)
}

// awaitRounds waits until every other running round of the document has
// queued or ended, or a batch is full: the rounds a batch served come back
// within their own reads of the bus, and new rounds start within theirs,
// and the first one to want the document would otherwise lead alone. The
// leader holds nothing meanwhile, so a round that must first finish an
// entry (finishHeld) can take the document.
func (c *Consolidator) awaitRounds(ctx context.Context, key string, g *group) error {
	gs := c.groups
	for {
		gs.mu.Lock()
		others, queued := gs.running[key]-1, len(g.queue)
		changed := gs.changed
		gs.mu.Unlock()
		if others <= queued || queued+1 >= c.cfg.BatchMax {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// lead runs one batch led by p, hands the waiters their results and the
// group to the next leader.
func (c *Consolidator) lead(scope memory.Scope, g *group, p *part) (*memory.Entry, error) {
	defer c.handOff(scope.Key(), g)
	if err := c.awaitRounds(p.ctx, scope.Key(), g); err != nil {
		return nil, err
	}
	job, release, err := p.hold(p.ctx, scope, p.log)
	if err != nil {
		if p.ctx.Err() == nil {
			// The document is busy elsewhere (or the bus failed): the
			// rounds this batch would have taken waited as long, and
			// their requests are put back with the leader's.
			for _, q := range c.drain(g, p)[1:] {
				q.done <- partResult{err: err}
			}
		}
		return nil, err
	}
	// Drained once the document is held: rounds that queued meanwhile
	// join this batch.
	batch := c.drain(g, p)
	results := c.commitBatch(job, scope, batch)
	release()
	for i, q := range batch[1:] {
		r := results[i+1]
		if r.err != nil && p.ctx.Err() != nil {
			r.err = errLeaderGone
		}
		q.done <- r
	}
	return results[0].entry, results[0].err
}

// drain takes the leader's part and the queued parts that fit the batch's
// bounds (Config.BatchMax parts, batchChunks × Config.ChunkTokens tokens,
// the leader's part whatever its size), oldest first. A part of a session
// already in the batch, and one whose round has ended, stay queued.
func (c *Consolidator) drain(g *group, leader *part) []*part {
	c.groups.mu.Lock()
	defer c.groups.mu.Unlock()
	batch := []*part{leader}
	total := leader.tokens
	var rest []*part
	for i, q := range g.queue {
		if len(batch) >= c.cfg.BatchMax || total+q.tokens > batchChunks*c.cfg.ChunkTokens {
			rest = append(rest, g.queue[i:]...)
			break
		}
		if q.ctx.Err() != nil || hasSession(batch, q.req.GetSessionKey()) {
			rest = append(rest, q)
			continue
		}
		q.state = taken
		batch = append(batch, q)
		total += q.tokens
	}
	g.queue = rest
	return batch
}

// handOff makes the oldest queued part the document's next leader, or
// forgets the group when none waits.
func (c *Consolidator) handOff(key string, g *group) {
	gs := c.groups
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if len(g.queue) == 0 {
		delete(gs.docs, key)
		return
	}
	next := g.queue[0]
	g.queue = g.queue[1:]
	next.state = leading
	close(next.lead)
}

// commitBatch asks the model, against the held document, for an entry per
// part and one memory update, logs each part's entry after its session's
// expected entry and applies the logged ones to MEMORY.md in one write.
// job is the document's hold. A single part is asked exactly as before
// batching (save_memory); if the model fails or its answer lacks a part,
// every part is archived raw and memory stays as it was.
func (c *Consolidator) commitBatch(job context.Context, scope memory.Scope, batch []*part) []partResult {
	results := make([]partResult, len(batch))
	fail := func(err error) []partResult {
		for i := range results {
			results[i].err = err
		}
		return results
	}
	log := batch[0].log
	if len(batch) > 1 {
		log.Info("consolidating rounds of the document together", "scope", scope.Key(), "rounds", len(batch))
	}
	doc, _, err := c.docs.Get(job, scope)
	if err != nil {
		return fail(err)
	}
	entries := make([]*nanofleetv1.HistoryEntry, len(batch))
	transcripts := make([]string, len(batch))
	for i, p := range batch {
		transcripts[i] = memory.Transcript(p.chunk, c.cfg.ToolChars)
		entries[i] = &nanofleetv1.HistoryEntry{
			SessionKey: p.req.GetSessionKey(), Scope: scope.Key(), FromSeq: p.cursor + 1, ToSeq: p.chunk[len(p.chunk)-1].Seq,
			Reason: p.req.GetReason(), CreatedAt: timestamppb.Now(),
		}
	}
	var upd *update
	texts, mem, used, merr := c.summariseParts(job, doc.GetContent(), transcripts)
	c.charge(job, used, shares(batch), log)
	if merr == nil {
		for i, e := range entries {
			e.Text = texts[i]
		}
		// An answer the bus cannot store is unusable like any other:
		// checked before anything is logged, so that no retry asks the
		// model again for what can never be written.
		if err := c.fits(job, scope, doc, entries, mem); err != nil {
			if !errors.Is(err, memory.ErrTooLarge) {
				return fail(err)
			}
			merr = err
		}
	}
	if merr != nil {
		if job.Err() != nil {
			return fail(context.Cause(job))
		}
		msg := "model failed; archiving the raw turns"
		if errors.Is(merr, memory.ErrTooLarge) {
			msg = "model's answer larger than the bus accepts; archiving the raw turns"
		}
		log.Warn(msg, "parts", len(batch), "err", oneLine(merr))
		for i, e := range entries {
			e.Text, e.Raw = transcripts[i], true
		}
	} else {
		upd = &update{base: doc.GetContent(), memory: mem}
	}
	var logged []*memory.Entry
	var payers []string
	var idx []int
	for i, p := range batch {
		seq, err := c.hist.Append(job, entries[i], p.expect)
		switch {
		case errors.Is(err, memory.ErrConflict):
			// Another consolidator logged this range first: the part is
			// void, results[i] stays nil.
		case err != nil:
			results[i].err = err
		default:
			e := &memory.Entry{Seq: seq, HistoryEntry: entries[i]}
			logged = append(logged, e)
			payers = append(payers, p.req.GetPayer())
			idx = append(idx, i)
			results[i].entry = e
		}
	}
	if len(logged) == 0 {
		return results
	}
	if len(logged) < len(batch) {
		// The update also holds what a void part's turns taught; the
		// logged entries are merged one by one instead, so memory learns
		// only from entries in the log.
		upd = nil
	}
	if err := c.finish(job, logged, payers, upd, log); err != nil {
		for _, i := range idx {
			results[i].err = err
		}
	}
	return results
}

// fits checks that the model's answer can be stored: each of entries,
// with the model's text, in the history log, and the document with mem
// (unless empty: memory unchanged) and every entry applied in the memory
// bucket. An answer too large for either gives an error wrapping
// memory.ErrTooLarge.
func (c *Consolidator) fits(ctx context.Context, scope memory.Scope, doc *nanofleetv1.MemoryDoc, entries []*nanofleetv1.HistoryEntry, mem string) error {
	if err := c.hist.Fits(ctx, entries...); err != nil {
		return err
	}
	content := doc.GetContent()
	if mem != "" {
		content = mem
	}
	return c.docs.Fits(ctx, scope, c.nextDoc(doc, content, entries))
}

// summariseParts asks the model for an entry per transcript and the new
// memory: one transcript with save_memory, as nanobot does, several with
// save_memories. The usage is the call's, also when its answer is
// unusable.
func (c *Consolidator) summariseParts(ctx context.Context, current string, transcripts []string) ([]string, string, llm.Usage, error) {
	if len(transcripts) == 1 {
		res, err := summarise(ctx, c.d.Model, c.cfg, current, transcripts[0])
		return []string{res.Entry}, res.Memory, res.Usage, err
	}
	res, err := summariseBatch(ctx, c.d.Model, c.cfg, current, transcripts)
	return res.Entries, res.Memory, res.Usage, err
}

func removePart(queue []*part, p *part) []*part {
	for i, q := range queue {
		if q == p {
			return append(queue[:i:i], queue[i+1:]...)
		}
	}
	return queue
}

func hasSession(batch []*part, key string) bool {
	for _, p := range batch {
		if p.req.GetSessionKey() == key {
			return true
		}
	}
	return false
}

// tokens estimates a chunk's size.
func tokens(chunk []session.Turn) int {
	n := 0
	for _, t := range chunk {
		n += memory.EstimateTurn(t)
	}
	return n
}
