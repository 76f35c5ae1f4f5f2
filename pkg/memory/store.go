package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/agenttool"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Consolidation reasons.
const (
	ReasonBudget = "budget"
	ReasonNew    = "new"
)

// Store is the worker side of memory: the memory text of each turn's
// prompt, and the consolidation requests of sessions that outgrew their
// budget. It satisfies the agent worker's Memory interface. Safe for
// concurrent use.
type Store struct {
	cfg   Config
	b     *bus.Bus
	log   *slog.Logger
	docs  *Docs
	links *Links
	hist  *Log
	revs  *Revisions
	// callTimeout bounds each operation (bus.CallTimeout; tests shorten
	// it): a turn's context lives for minutes, and a read lost with a
	// server that died must fail (the turn goes on without its memory),
	// not hold the turn and its session until then.
	callTimeout time.Duration

	asked *askedTable
}

// Option changes an optional setting of [New].
type Option func(*Store)

// WithLogger sets the store's logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = observe.OrDiscard(l) } }

// New returns the memory of the fleet b belongs to; the bus layout and
// [Assets] must have been provisioned.
func New(ctx context.Context, cfg Config, b *bus.Bus, opts ...Option) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkProvisioned(ctx, b); err != nil {
		return nil, err
	}
	docs, err := OpenDocs(ctx, b)
	if err != nil {
		return nil, err
	}
	links, err := OpenLinks(ctx, b)
	if err != nil {
		return nil, err
	}
	revs, err := OpenRevisions(ctx, b)
	if err != nil {
		return nil, err
	}
	s := &Store{
		cfg: cfg.withDefaults(), b: b, log: slog.New(slog.DiscardHandler), docs: docs, links: links,
		hist: OpenLog(b), revs: revs, callTimeout: bus.CallTimeout, asked: newAskedTable(askedKeep, time.Now),
	}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Links returns the identity-link table.
func (s *Store) Links() *Links { return s.links }

// Config returns the store's configuration with defaults applied.
func (s *Store) Config() Config { return s.cfg }

// Scope returns the memory scope of a turn.
func (s *Store) Scope(ctx context.Context, in *nanofleetv1.InboundMessage, sessionKey string) (Scope, error) {
	agent := s.cfg.Agent
	kind := s.cfg.Scope
	if kind == KindUser && IsGroup(in) {
		kind = s.cfg.GroupScope
	}
	switch kind {
	case KindAgent:
		return AgentScope(agent), nil
	case KindSession:
		return SessionScope(agent, sessionKey), nil
	}
	if in.GetSenderId() == "" || in.GetChannel() == "" {
		// Nobody in particular (a system message): the conversation's own.
		return SessionScope(agent, sessionKey), nil
	}
	// The one request here: bounded, as the store's callers are.
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	defer cancel()
	person, err := s.links.Person(ctx, in.GetChannel(), in.GetSenderId())
	if err != nil {
		return Scope{}, err
	}
	return UserScope(agent, person), nil
}

// Context returns the memory text of a turn's prompt: the scope's
// MEMORY.md and its newest history entries within Config.RecentTokens.
func (s *Store) Context(ctx context.Context, in *nanofleetv1.InboundMessage, sessionKey string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	defer cancel()
	sc, err := s.Scope(ctx, in, sessionKey)
	if err != nil {
		return "", err
	}
	doc, _, err := s.docs.Get(ctx, sc)
	if err != nil {
		return "", err
	}
	return RenderContext(doc, s.cfg.RecentTokens), nil
}

// RenderContext renders a scope's document for the prompt: MEMORY.md, then
// as many of the newest history entries as fit recentTokens, oldest first.
func RenderContext(doc *nanofleetv1.MemoryDoc, recentTokens int) string {
	var b strings.Builder
	if m := strings.TrimSpace(doc.GetContent()); m != "" {
		b.WriteString("## Long-term Memory\n\n" + m + "\n\n")
	}
	var kept []string
	left := recentTokens
	for i := len(doc.GetRecent()) - 1; i >= 0 && left > 0; i-- {
		text := FormatEntry(doc.GetRecent()[i])
		cost := EstimateText(text) + 2
		if cost > left {
			break
		}
		left -= cost
		kept = append(kept, text)
	}
	if len(kept) > 0 {
		b.WriteString("## Recent History\n\n")
		for i := len(kept) - 1; i >= 0; i-- {
			b.WriteString("- " + strings.ReplaceAll(kept[i], "\n", "\n  ") + "\n")
		}
		b.WriteString("\nOlder conversations are in the history log: search it with the memory_search tool.\n")
	}
	return strings.TrimSpace(b.String())
}

// AfterTurn asks for consolidation when the session's unconsolidated
// history takes more than Config.ConsolidateShare of budgetTokens: the
// oldest turns go, until about half of that share is free. The newest
// turn always stays. payer is the user of the turn
// ("<channel>:<sender>"), whose daily token usage the consolidation's
// model calls count in (package usage).
func (s *Store) AfterTurn(ctx context.Context, in *nanofleetv1.InboundMessage, sessionKey, payer string, info *nanofleetv1.SessionInfo, hist *session.History, budgetTokens int) error {
	if hist == nil || len(hist.Turns) < 2 || budgetTokens <= 0 {
		return nil
	}
	share := int(float64(budgetTokens) * s.cfg.ConsolidateShare)
	costs := make([]int, len(hist.Turns))
	total := 0
	for i, t := range hist.Turns {
		costs[i] = EstimateTurn(t)
		total += costs[i]
	}
	if total <= share {
		s.asked.forget(sessionKey, info.GetConsolidatedSeq())
		return nil
	}
	if s.asked.get(sessionKey) > info.GetConsolidatedSeq() {
		// One request at a time per session: the one outstanding brings
		// the history down to half its share. Asking for a later range on
		// every turn meanwhile queued a request a turn that the
		// consolidator worked through one by one (with a fast model it fell
		// behind for good); the prompt keeps to the budget meanwhile.
		return nil
	}
	target := share / 2
	cut := 0
	for cut < len(hist.Turns)-1 && total > target {
		total -= costs[cut]
		cut++
	}
	to := hist.Turns[cut-1].Seq
	return s.request(ctx, in, sessionKey, payer, info, to, ReasonBudget)
}

// Archive asks for consolidation of everything up to upTo (for /new),
// counted for payer as in AfterTurn.
func (s *Store) Archive(ctx context.Context, in *nanofleetv1.InboundMessage, sessionKey, payer string, info *nanofleetv1.SessionInfo, upTo uint64) error {
	if upTo <= info.GetConsolidatedSeq() {
		return nil
	}
	return s.request(ctx, in, sessionKey, payer, info, upTo, ReasonNew)
}

func (s *Store) request(ctx context.Context, in *nanofleetv1.InboundMessage, sessionKey, payer string, info *nanofleetv1.SessionInfo, to uint64, reason string) error {
	from := info.GetConsolidatedSeq() + 1
	if to < from {
		return nil
	}
	if s.asked.get(sessionKey) >= to {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	defer cancel()
	sc, err := s.Scope(ctx, in, sessionKey)
	if err != nil {
		return err
	}
	if err := PublishRequest(ctx, s.b, &nanofleetv1.ConsolidationRequest{
		SessionKey: sessionKey, FromSeq: from, ToSeq: to, Reason: reason,
		Scope: sc.Key(), RequestedAt: timestamppb.Now(), Payer: payer,
	}); err != nil {
		return err
	}
	s.asked.put(sessionKey, to)
	s.log.Debug("consolidation requested", "session", sessionKey, "from", from, "to", to, "reason", reason, "scope", sc.Key())
	return nil
}

// PublishRequest publishes a consolidation request with the deterministic
// message id "<session>:<from>-<to>", so a duplicate is stored once.
func PublishRequest(ctx context.Context, b *bus.Bus, req *nanofleetv1.ConsolidationRequest) error {
	data, err := proto.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode consolidation request: %w", err)
	}
	m := nats.NewMsg(b.Space.Consolidate(req.GetSessionKey()))
	m.Data = data
	m.Header.Set(nats.MsgIdHdr, EntryID(req.GetSessionKey(), req.GetFromSeq(), req.GetToSeq()))
	if _, err := bus.PublishMsg(ctx, b.JS, m); err != nil {
		return fmt.Errorf("publish consolidation request for %s: %w", req.GetSessionKey(), err)
	}
	return nil
}

// Search searches the scope of a turn.
func (s *Store) Search(ctx context.Context, in *nanofleetv1.InboundMessage, sessionKey, query string, limit int) ([]Entry, error) {
	sc, err := s.Scope(ctx, in, sessionKey)
	if err != nil {
		return nil, err
	}
	return s.hist.Search(ctx, sc, query, limit, s.cfg.SearchScan)
}

// Tools returns the worker-side memory tools: memory_search.
func (s *Store) Tools() []agenttool.Tool { return []agenttool.Tool{SearchTool{s: s}} }

// Commands returns the memory slash commands: /dream-log and
// /dream-restore.
func (s *Store) Commands() []agenttool.Command {
	return []agenttool.Command{DreamLogCommand{s: s}, DreamRestoreCommand{s: s}}
}

// errNoTurn is returned by tools called outside a turn.
var errNoTurn = errors.New("memory: no turn context")
