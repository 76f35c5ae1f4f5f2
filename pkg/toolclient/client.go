package toolclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/subject"
	"github.com/nanofleet/nanofleet/pkg/toolschema"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

const (
	defaultLiveness    = 5 * time.Second
	defaultCallTimeout = 15 * time.Minute
	defaultRetries     = 2
	catalogTimeout     = 5 * time.Second
	// catalogGatherMin and catalogGatherMax bound how long Catalog waits
	// for more runners' answers after the first.
	catalogGatherMin = 50 * time.Millisecond
	catalogGatherMax = 500 * time.Millisecond
	// noResponderTries is how often a call meeting "no responders" is
	// sent before giving up (a runner may be restarting).
	noResponderTries = 3
)

// Client calls tools on the fleet's runners. It is safe for concurrent
// use; one per process is enough.
type Client struct {
	nc          *nats.Conn
	space       subject.Space
	log         *slog.Logger
	liveness    time.Duration
	callTimeout time.Duration
	maxRetries  int
	allRunners  int // 0: unknown

	muxOnce sync.Once
	muxErr  error
	inbox   string // prefix of reply subjects, ends with "."
	mu      sync.Mutex
	pending map[string]*pending
	cache   catalogCache
}

// pending is one attempt waiting for its runner.
type pending struct {
	beat  chan struct{}  // a heartbeat arrived
	final chan *nats.Msg // the result, a rejection or "no responders"
}

// New returns a client on b's connection and fleet prefix.
func New(b *bus.Bus, opts ...Option) (*Client, error) {
	c := &Client{
		nc:          b.NC,
		space:       b.Space,
		log:         slog.New(slog.DiscardHandler),
		liveness:    defaultLiveness,
		callTimeout: defaultCallTimeout,
		maxRetries:  defaultRetries,
		pending:     map[string]*pending{},
	}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Catalog returns the definitions of every tool the runners serve, sorted
// by name: the union of the runners' catalogs, since runners may serve
// different tools (their own MCP servers). Every runner answers the
// catalog request; Catalog gathers the answers that arrive until a short
// window after the first one (three times the first one's delay, between
// 50 and 500 ms). A tool several runners define differently gets one
// definition, the same whichever runner answered first. Without a
// deadline on ctx it waits 5 s for the first answer. It asks the runners
// every time, and refreshes the cache CachedCatalog serves.
func (c *Client) Catalog(ctx context.Context) ([]*nanofleetv1.ToolDefinition, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, catalogTimeout)
		defer cancel()
	}
	subj := c.space.ToolCatalog()
	inbox := c.nc.NewInbox()
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("tool catalog: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	start := time.Now()
	if err := c.nc.PublishRequest(subj, inbox, nil); err != nil {
		return nil, fmt.Errorf("tool catalog: %w", err)
	}
	first, err := sub.NextMsgWithContext(ctx)
	if errors.Is(err, nats.ErrNoResponders) || (err == nil && len(first.Data) == 0 && first.Header.Get(natsStatusHeader) == noResponders) {
		return nil, fmt.Errorf("%w: no responders on %s", ErrNoRunners, subj)
	}
	if err != nil {
		return nil, fmt.Errorf("tool catalog: %w", err)
	}
	answers := []*nats.Msg{first}
	window := min(max(3*time.Since(start), catalogGatherMin), catalogGatherMax)
	wctx, cancel := context.WithTimeout(ctx, window)
	for c.allRunners == 0 || len(answers) < c.allRunners {
		m, err := sub.NextMsgWithContext(wctx)
		if err != nil {
			break
		}
		answers = append(answers, m)
	}
	cancel()
	byName := map[string]*nanofleetv1.ToolDefinition{}
	var bad error
	for _, m := range answers {
		var cat nanofleetv1.ToolCatalog
		if err := proto.Unmarshal(m.Data, &cat); err != nil {
			bad = fmt.Errorf("%w: catalog: %w", ErrBadResponse, err)
			c.log.Warn("tool catalog answer not readable; ignored", "err", err)
			continue
		}
		bad = nil
		for _, d := range cat.GetTools() {
			if prev, ok := byName[d.GetName()]; !ok || preferred(d, prev) {
				byName[d.GetName()] = d
			}
		}
	}
	if len(byName) == 0 && bad != nil {
		return nil, bad
	}
	defs := make([]*nanofleetv1.ToolDefinition, 0, len(byName))
	for _, d := range byName {
		defs = append(defs, d)
	}
	toolschema.SortDefinitions(defs)
	c.cache.store(defs, byName)
	return slices.Clone(defs), nil
}

// preferred orders differing definitions of one tool so that the merged
// catalog does not depend on which runner answered first.
func preferred(a, b *nanofleetv1.ToolDefinition) bool {
	opts := proto.MarshalOptions{Deterministic: true}
	da, _ := opts.Marshal(a)
	db, _ := opts.Marshal(b)
	return bytes.Compare(da, db) < 0
}

// definition returns a tool's definition from the cached catalog,
// fetching it first when it is old or lacks the tool.
func (c *Client) definition(ctx context.Context, name string) (*nanofleetv1.ToolDefinition, bool) {
	d, ok, fresh := c.cache.lookup(name)
	if ok && fresh {
		return d, true
	}
	if _, err := c.Catalog(ctx); err != nil {
		return d, ok
	}
	d, ok, _ = c.cache.lookup(name)
	return d, ok
}

// outcome of one attempt.
type outcome int

const (
	outcomeDone         outcome = iota
	outcomeRejected             // the runner did not start the call
	outcomeNoResponders         // nobody serves the tool's subject
	outcomeLost                 // the runner went silent
)

// Call runs a tool call on some runner and returns its result. Tool
// failures, bad arguments, refusals, timeouts and interruptions are
// results with is_error set and an error kind, for the model to read; the
// error return is only for a cancelled ctx or a call that cannot be sent.
// Without a deadline on ctx the call may take 15 minutes.
func (c *Client) Call(ctx context.Context, req *nanofleetv1.ToolRequest) (*nanofleetv1.ToolResult, error) {
	callCtx := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, c.callTimeout)
		defer cancel()
	}
	req = proto.CloneOf(req)
	if dl, ok := callCtx.Deadline(); ok {
		left := time.Until(dl).Milliseconds()
		if req.GetTimeoutMs() <= 0 || req.GetTimeoutMs() > left {
			req.TimeoutMs = max(left, 1)
		}
	}
	data, err := proto.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode tool request: %w", err)
	}
	name := req.GetName()
	retries, noResp := 0, 0
	for {
		res, out, runner, err := c.attempt(callCtx, name, data)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if callCtx.Err() != nil {
				return errorResult(req, nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_TIMEOUT,
					fmt.Sprintf("Error: %s did not finish within the call's deadline.", name)), nil
			}
			return nil, err
		}
		switch out {
		case outcomeDone:
			res.CallId = req.GetCallId()
			return res, nil
		case outcomeRejected:
			if retries < c.maxRetries {
				retries++
				c.log.Info("tool call rejected by a stopping runner; sending it again", "tool", name, "runner", runner)
				continue
			}
			return errorResult(req, nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_INTERRUPTED,
				fmt.Sprintf("Error: %s was not run: the tool runners are shutting down. Try again shortly.", name)), nil
		case outcomeNoResponders:
			noResp++
			if noResp < noResponderTries {
				// A runner may be restarting; a cancelled wait is
				// reported by the next attempt.
				_ = backoff.Sleep(callCtx, time.Duration(noResp)*100*time.Millisecond)
				continue
			}
			return c.noRunner(callCtx, req), nil
		case outcomeLost:
			def, _ := c.definition(callCtx, name)
			if def.GetReadOnly() && retries < c.maxRetries {
				retries++
				c.log.Warn("tool runner went silent during a read-only call; retrying on another runner", "tool", name, "runner", runner)
				continue
			}
			c.log.Warn("tool runner went silent during a call; not retrying", "tool", name, "runner", runner)
			return errorResult(req, nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_INTERRUPTED,
				fmt.Sprintf("Error: %s was interrupted: the tool runner handling it stopped responding (it may have crashed) and the call was not retried, because %s may have changed things before it stopped. Check the workspace's state before running it again.", name, name)), nil
		}
	}
}

// attempt publishes the request once and follows it to its end.
func (c *Client) attempt(ctx context.Context, name string, data []byte) (*nanofleetv1.ToolResult, outcome, string, error) {
	if err := c.startMux(); err != nil {
		return nil, 0, "", err
	}
	token := nats.NewInbox()[len(nats.InboxPrefix):]
	p := &pending{beat: make(chan struct{}, 1), final: make(chan *nats.Msg, 1)}
	c.mu.Lock()
	c.pending[token] = p
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, token)
		c.mu.Unlock()
	}()
	msg := &nats.Msg{Subject: c.space.ToolCall(name), Reply: c.inbox + token, Data: data}
	if err := c.nc.PublishMsg(msg); err != nil {
		return nil, 0, "", fmt.Errorf("send %s call: %w", name, err)
	}
	timer := time.NewTimer(c.liveness)
	defer timer.Stop()
	runner := ""
	for {
		select {
		case <-ctx.Done():
			return nil, 0, runner, ctx.Err()
		case <-timer.C:
			return nil, outcomeLost, runner, nil
		case <-p.beat:
			timer.Reset(c.liveness)
		case m := <-p.final:
			if r := m.Header.Get(HeaderRunner); r != "" {
				runner = r
			}
			switch {
			case len(m.Data) == 0 && m.Header.Get(natsStatusHeader) == noResponders:
				return nil, outcomeNoResponders, runner, nil
			case m.Header.Get(HeaderStatus) == StatusRejected:
				return nil, outcomeRejected, runner, nil
			}
			var res nanofleetv1.ToolResult
			if err := proto.Unmarshal(m.Data, &res); err != nil {
				return nil, 0, runner, fmt.Errorf("%w: %s result: %w", ErrBadResponse, name, err)
			}
			return &res, outcomeDone, runner, nil
		}
	}
}

// startMux subscribes once to the client's reply subjects and routes each
// message to its waiting attempt.
func (c *Client) startMux() error {
	c.muxOnce.Do(func() {
		c.inbox = c.nc.NewInbox() + "."
		_, c.muxErr = c.nc.Subscribe(c.inbox+"*", func(m *nats.Msg) {
			token := m.Subject[len(c.inbox):]
			c.mu.Lock()
			p := c.pending[token]
			c.mu.Unlock()
			if p == nil {
				return // a late heartbeat of a finished attempt
			}
			if m.Header.Get(HeaderStatus) == StatusRunning {
				select {
				case p.beat <- struct{}{}:
				default:
				}
				return
			}
			select {
			case p.final <- m:
			default:
			}
		})
		if c.muxErr != nil {
			c.muxErr = fmt.Errorf("subscribe to tool replies: %w", c.muxErr)
		}
	})
	return c.muxErr
}

// noRunner explains why nobody answered a call.
func (c *Client) noRunner(ctx context.Context, req *nanofleetv1.ToolRequest) *nanofleetv1.ToolResult {
	defs, err := c.Catalog(ctx)
	if err != nil {
		return errorResult(req, nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_FAILED,
			fmt.Sprintf("Error: no tool runner is available to run %s (nothing answers on %s); the fleet's tool-runner service is down or not started.", req.GetName(), c.space.ToolCall(req.GetName())))
	}
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.GetName()
	}
	for _, n := range names {
		if n == req.GetName() {
			return errorResult(req, nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_FAILED,
				fmt.Sprintf("Error: no tool runner took the %s call; try again shortly.", req.GetName()))
		}
	}
	return errorResult(req, nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_UNKNOWN_TOOL,
		fmt.Sprintf("Error: unknown tool %q. Available tools: %s.", req.GetName(), strings.Join(names, ", ")))
}

func errorResult(req *nanofleetv1.ToolRequest, kind nanofleetv1.ToolErrorKind, content string) *nanofleetv1.ToolResult {
	return &nanofleetv1.ToolResult{CallId: req.GetCallId(), Content: content, IsError: true, ErrorKind: kind}
}
