package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/every"
	"github.com/nanofleet/nanofleet/pkg/textcut"
	"github.com/nanofleet/nanofleet/pkg/toolclient"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"

	"github.com/nanofleet/nanofleet/services/tool-runner/quota"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools"
	"github.com/nanofleet/nanofleet/services/tool-runner/tools/output"
)

// serveCatalog answers the built-in definitions, then the MCP ones, each
// sorted by name.
func (r *Runner) serveCatalog(req micro.Request) {
	cat := &nanofleetv1.ToolCatalog{}
	defs := r.set.Definitions()
	if r.mcp != nil {
		defs = append(defs, r.mcp.Definitions()...)
	}
	for _, d := range defs {
		cat.Tools = append(cat.Tools, d.Definition())
	}
	data, err := proto.Marshal(cat)
	if err != nil {
		req.Error("500", err.Error(), nil)
		return
	}
	req.Respond(data)
}

// serve returns the handler of one tool's endpoint. micro delivers an
// endpoint's messages one by one, so each call gets its own goroutine.
func (r *Runner) serve(name string) micro.HandlerFunc {
	return func(req micro.Request) {
		r.mu.Lock()
		if r.stopping {
			r.mu.Unlock()
			req.Respond(nil, micro.WithHeaders(r.headers(toolclient.StatusRejected)))
			return
		}
		r.wg.Add(1)
		r.mu.Unlock()
		r.heartbeat(req.Reply())
		go func() {
			defer r.wg.Done()
			r.handle(name, req)
		}()
	}
}

func (r *Runner) headers(status string) micro.Headers {
	return micro.Headers{toolclient.HeaderStatus: {status}, toolclient.HeaderRunner: {r.id}}
}

func (r *Runner) heartbeat(reply string) {
	if reply == "" {
		return
	}
	msg := nats.NewMsg(reply)
	msg.Header.Set(toolclient.HeaderStatus, toolclient.StatusRunning)
	msg.Header.Set(toolclient.HeaderRunner, r.id)
	if err := r.bus.NC.PublishMsg(msg); err != nil {
		r.log.Debug("heartbeat", "err", err)
	}
}

func (r *Runner) handle(name string, req micro.Request) {
	ctx, cancel := context.WithCancel(r.baseCtx)
	stopBeats := every.Go(ctx, time.Duration(r.cfg.Runner.HeartbeatMs)*time.Millisecond, func() bool {
		r.heartbeat(req.Reply())
		return true
	})
	res := r.call(ctx, name, req.Data())
	cancel()
	stopBeats() // the result is the last message on the inbox
	data, err := encodeResult(res)
	if err != nil {
		r.log.Error("encode result", "tool", name, "err", err)
		return
	}
	if err := req.Respond(data, micro.WithHeaders(r.headers(toolclient.StatusDone))); err != nil {
		r.log.Warn("send result", "tool", name, "err", err)
	}
}

// encodeResult marshals res. A tool's text that is not UTF-8 (a page in
// another encoding, a program's raw output) is refused by proto: unsent,
// the call would wait out its timeout, so the text is sent with U+FFFD in
// place of the bytes that are not UTF-8.
func encodeResult(res *nanofleetv1.ToolResult) ([]byte, error) {
	data, err := proto.Marshal(res)
	if err == nil {
		return data, nil
	}
	valid := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
	res.CallId, res.Content, res.FullObject = valid(res.GetCallId()), valid(res.GetContent()), valid(res.GetFullObject())
	for _, m := range res.GetMedia() {
		m.Object, m.MimeType, m.Name, m.Url = valid(m.GetObject()), valid(m.GetMimeType()), valid(m.GetName()), valid(m.GetUrl())
	}
	return proto.Marshal(res)
}

// call runs one tool call and always returns a result.
func (r *Runner) call(ctx context.Context, name string, data []byte) *nanofleetv1.ToolResult {
	start := time.Now()
	var tr nanofleetv1.ToolRequest
	if err := proto.Unmarshal(data, &tr); err != nil {
		return &nanofleetv1.ToolResult{IsError: true, ErrorKind: nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_INVALID_ARGUMENTS,
			Content: "Error: malformed tool request: " + err.Error()}
	}
	log := r.log.With("tool", name, "call", tr.GetCallId(), "session", tr.GetSessionKey())
	res := r.run(ctx, log, name, &tr)
	res.CallId = tr.GetCallId()
	if res.IsError {
		log.Info("tool call failed", "kind", res.ErrorKind.String(), "took", time.Since(start), "error", firstLine(res.Content))
	} else {
		log.Debug("tool call", "took", time.Since(start), "chars", len(res.Content))
	}
	return res
}

func (r *Runner) run(ctx context.Context, log *slog.Logger, name string, tr *nanofleetv1.ToolRequest) *nanofleetv1.ToolResult {
	fail := func(err error, partial string) *nanofleetv1.ToolResult {
		content := "Error: " + err.Error()
		if partial != "" {
			content += "\n\n" + partial
		}
		return r.shrink(ctx, name, tr, &nanofleetv1.ToolResult{Content: content, IsError: true, ErrorKind: tools.ErrorKind(err)})
	}
	tool, schema, ok := r.set.Get(name)
	if !ok && r.mcp != nil {
		tool, schema, ok = r.mcp.Get(name)
	}
	if !ok {
		names := r.set.Names()
		if r.mcp != nil {
			names = append(names, r.mcp.Names()...)
		}
		return &nanofleetv1.ToolResult{IsError: true, ErrorKind: nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_UNKNOWN_TOOL,
			Content: fmt.Sprintf("Error: unknown tool %q. Available tools: %v", name, names)}
	}
	args, err := schema.Parse(tr.GetArgumentsJson())
	if err != nil {
		return fail(fmt.Errorf("invalid arguments for %s: %w", name, err), "")
	}
	timeout := config.SecondsDuration(r.cfg.Runner.CallTimeout)
	if ms := tr.GetTimeoutMs(); ms > 0 {
		timeout = time.Duration(ms) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case r.sem <- struct{}{}:
		defer func() { <-r.sem }()
	case <-ctx.Done():
		return fail(fmt.Errorf("%s waited for a free slot until its deadline: %w", name, ctx.Err()), "")
	}
	ws, err := r.openWorkspace(tr)
	if err != nil {
		log.Error("open workspace", "err", err)
		return fail(err, "")
	}
	defer ws.Close()
	call := &tools.Call{
		ID:         tr.GetCallId(),
		SessionKey: tr.GetSessionKey(),
		AgentID:    tr.GetAgentId(),
		Args:       args,
		Workspace:  ws,
		Blobs:      r.blobs,
		Log:        log,
	}
	out, err := r.runInQuota(ctx, log, name, tool, call, tr)
	if err != nil {
		return fail(err, out.Text)
	}
	return r.shrink(ctx, name, tr, &nanofleetv1.ToolResult{Content: out.Text, Media: out.Media})
}

// runInQuota runs a call within its workspace's quota. The quota applies
// to the built-in tools that write (MCP servers keep their files
// elsewhere): a file tool is refused when it would pass the quota; exec
// may grow no file past what is left, is stopped while it runs once the
// workspace is over, and its result says when it left it over. The same
// holds for the room kept free on the store's disk (WithStoreDisk).
func (r *Runner) runInQuota(ctx context.Context, log *slog.Logger, name string, tool tools.Tool, call *tools.Call, tr *nanofleetv1.ToolRequest) (tools.Result, error) {
	ws := call.Workspace
	_, _, builtin := r.set.Get(name)
	if !builtin || tool.Definition().ReadOnly || !r.quota.Limits().On() {
		return tool.Run(ctx, call)
	}
	if name != execTool {
		left, err := r.quota.Left(ctx, ws.Dir(), ws.Root())
		if err != nil {
			return tools.Result{}, err
		}
		if err := r.quota.Reserve(ctx, ws.Dir(), ws.Root(), writeEstimate(name, tr)); err != nil {
			log.Info("tool call refused by the workspace quota", "err", err)
			return tools.Result{}, err
		}
		// What a write adds is bounded by its arguments' size, the
		// estimate, except an edit's: replace_all multiplies the new
		// text. The tool refuses an edit that grows the workspace past
		// what was left, and the next call measures what it wrote.
		call.FileSizeLimit = left
		defer r.quota.Forget(ws.Dir())
		return tool.Run(ctx, call)
	}
	left, err := r.quota.Left(ctx, ws.Dir(), ws.Root())
	if err != nil {
		return tools.Result{}, err
	}
	call.FileSizeLimit = left
	qctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	watchCtx, endWatch := context.WithCancel(qctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		r.quota.Watch(watchCtx, ws.Dir(), ws.Root(), stop)
	}()
	out, err := tool.Run(qctx, call)
	endWatch()
	<-watched // the workspace is closed after this returns
	if cause := context.Cause(qctx); errors.Is(cause, quota.ErrExceeded) || errors.Is(cause, quota.ErrDiskLow) {
		log.Warn("command stopped: workspace over its quota or its disk nearly full", "workspace", ws.Dir(), "err", cause)
		return out, fmt.Errorf("the command was stopped: %w", cause)
	}
	// The command may have used up the call's deadline; the look after
	// it gets a moment of its own.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	note, qerr := r.quota.AfterCommand(actx, ws.Dir(), ws.Root())
	if qerr != nil {
		log.Warn("measure workspace after exec", "err", qerr)
	}
	if note != "" {
		log.Warn("workspace over its quota after exec", "workspace", ws.Dir(), "note", note)
		out.Text += "\n\n" + note
	}
	return out, err
}

// writeEstimate is what a file tool call may add to its workspace: at
// most its arguments' size, and a file unless it edits one in place.
func writeEstimate(name string, tr *nanofleetv1.ToolRequest) quota.Usage {
	u := quota.Usage{Bytes: int64(len(tr.GetArgumentsJson())), Files: 1}
	if name == "edit_file" {
		u.Files = 0
	}
	return u
}

// shrink stores an oversize result and replaces it by a preview.
func (r *Runner) shrink(ctx context.Context, name string, tr *nanofleetv1.ToolRequest, res *nanofleetv1.ToolResult) *nanofleetv1.ToolResult {
	if name == "read_tool_output" || utf8.RuneCountInString(res.Content) <= r.cfg.Runner.OversizeChars {
		return res
	}
	// The call's own deadline may have passed (a timed-out exec);
	// storing gets a moment of its own.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	ref, err := output.Store(sctx, r.blobs, tr.GetSessionKey(), res.Content)
	if err != nil {
		r.log.Warn("oversize result not stored; cutting it", "tool", name, "err", err)
		res.Content = textcut.RunePrefix(res.Content, r.cfg.Runner.OversizeChars) + "\n\n[output cut: it was too long and could not be stored]"
		return res
	}
	res.Content = output.Preview(res.Content, ref, r.cfg.Runner.PreviewChars)
	res.FullObject = ref
	return res
}
