package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/nanofleet/nanofleet/pkg/agenttool"
	"github.com/nanofleet/nanofleet/pkg/toolschema"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/subagent"
)

// LocalTool is a tool that acts on the fleet and so runs inside the worker.
type LocalTool = agenttool.Tool

// Command is a slash command provided by another part of the fleet.
type Command = agenttool.Command

// TurnContext is what a local tool or command may know and do of its turn.
type TurnContext = agenttool.TurnContext

// catalog merges the tool runners' catalog with the worker's local tools.
// The runners' catalog comes from RemoteTools' cache; the merge is made
// again only when that cache hands out a new catalog.
type catalog struct {
	remote RemoteTools
	local  []LocalTool
	log    *slog.Logger

	mu      sync.Mutex
	merged  bool                          // defs has been made once
	from    []*nanofleetv1.ToolDefinition // the runners' catalog defs was made from
	defs    []*nanofleetv1.ToolDefinition
	byName  map[string]*nanofleetv1.ToolDefinition
	schemas map[string]*toolschema.Schema
}

func (c *catalog) definitions(ctx context.Context) ([]*nanofleetv1.ToolDefinition, map[string]*nanofleetv1.ToolDefinition) {
	// Until the runners have answered once, turns wait for the catalog;
	// without runners they get the local tools and the next turn asks
	// again.
	remote, err := c.remote.CachedCatalog(ctx)
	if err != nil {
		c.log.Warn("tool catalog unavailable; local tools only", "err", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.merged || !sameSlice(remote, c.from) {
		c.install(remote)
	}
	return c.defs, c.byName
}

// sameSlice reports whether a and b are the same slice: the cache hands out
// one slice until it is refreshed.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// install merges the runners' tools with the local ones. The caller holds
// mu.
func (c *catalog) install(remote []*nanofleetv1.ToolDefinition) {
	if c.schemas == nil {
		c.schemas = map[string]*toolschema.Schema{}
		for _, lt := range c.local {
			t := lt.Tool()
			c.schemas[t.Name] = toolschema.MustCompile(t.Parameters)
		}
	}
	defs := slices.Clone(remote)
	for _, lt := range c.local {
		defs = append(defs, lt.Tool().Definition())
	}
	toolschema.SortDefinitions(defs)
	c.defs = defs
	c.byName = make(map[string]*nanofleetv1.ToolDefinition, len(defs))
	for _, d := range defs {
		c.byName[d.GetName()] = d
	}
	c.merged, c.from = true, remote
}

// turnTools is the toolset of one turn.
type turnTools struct {
	c    *catalog
	t    *turn
	defs []*nanofleetv1.ToolDefinition
	tc   *TurnContext
}

func (c *catalog) forTurn(ctx context.Context, t *turn) *turnTools {
	defs, _ := c.definitions(ctx)
	// A subagent's turn gets only the tools its task names.
	defs = subagent.FilterDefinitions(t.in, defs)
	return &turnTools{c: c, t: t, defs: defs, tc: t.tc()}
}

// tc returns what local tools and commands may know and do of the turn.
func (t *turn) tc() *TurnContext {
	return &TurnContext{
		SessionKey: t.key,
		TurnID:     t.id,
		InboundSeq: t.meta.Sequence.Stream,
		Inbound:    t.in,
		Send: func(channel, chatID, text string) error {
			if channel == "" {
				channel = t.in.GetChannel()
			}
			if chatID == "" {
				chatID = t.in.GetChatId()
			}
			toOrigin := channel == t.in.GetChannel() && chatID == t.in.GetChatId()
			return t.state.addMessage(t.outbound(nanofleetv1.OutboundKind_OUTBOUND_KIND_MESSAGE, channel, chatID, text), toOrigin)
		},
	}
}

func (tt *turnTools) Definitions() []*nanofleetv1.ToolDefinition { return tt.defs }

func (tt *turnTools) Call(ctx context.Context, call *nanofleetv1.ToolCall) *nanofleetv1.ToolResult {
	res := tt.call(ctx, call)
	if f := tt.t.w.d.Observer.ToolCalled; f != nil {
		outcome := "ok"
		if res.GetIsError() {
			outcome = strings.ToLower(strings.TrimPrefix(res.GetErrorKind().String(), "TOOL_ERROR_KIND_"))
		}
		f(call.GetName(), outcome)
	}
	return res
}

func (tt *turnTools) call(ctx context.Context, call *nanofleetv1.ToolCall) *nanofleetv1.ToolResult {
	for _, lt := range tt.c.local {
		if lt.Tool().Name == call.GetName() {
			return tt.callLocal(ctx, lt, call)
		}
	}
	res, err := tt.c.remote.Call(ctx, &nanofleetv1.ToolRequest{
		CallId:        call.GetId(),
		Name:          call.GetName(),
		ArgumentsJson: call.GetArgumentsJson(),
		SessionKey:    tt.t.key,
		AgentId:       tt.t.w.cfg.Agent,
		TurnId:        tt.t.id,
	})
	if err != nil {
		return &nanofleetv1.ToolResult{CallId: call.GetId(), IsError: true, ErrorKind: nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_FAILED,
			Content: fmt.Sprintf("Error: tool %s could not be run: %v", call.GetName(), err)}
	}
	return res
}

func (tt *turnTools) callLocal(ctx context.Context, lt LocalTool, call *nanofleetv1.ToolCall) *nanofleetv1.ToolResult {
	tt.c.mu.Lock()
	schema := tt.c.schemas[call.GetName()]
	tt.c.mu.Unlock()
	args, err := schema.Parse(call.GetArgumentsJson())
	if err != nil {
		return &nanofleetv1.ToolResult{CallId: call.GetId(), IsError: true, ErrorKind: nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_INVALID_ARGUMENTS,
			Content: "Error: invalid arguments for " + call.GetName() + ": " + err.Error()}
	}
	out, err := lt.Call(ctx, tt.tc, args)
	if err != nil {
		kind := nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_FAILED
		if errors.Is(err, toolschema.ErrInvalidArguments) {
			kind = nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_INVALID_ARGUMENTS
		}
		return &nanofleetv1.ToolResult{CallId: call.GetId(), IsError: true, ErrorKind: kind, Content: "Error: " + err.Error()}
	}
	return &nanofleetv1.ToolResult{CallId: call.GetId(), Content: out}
}

// Bounds of what the message tool sends. Every message is split into
// platform messages (Telegram's hold 4,096 characters) that a channel
// delivers a few at a time for every chat, under the platform's rate
// limits; unbounded, one turn's model (told so by a fetched page or a
// group member) sent 150 messages of 10,000 characters, 1.5 MB: about
// 450 Telegram messages to deliver before other chats' replies.
const (
	// MaxMessageChars bounds one message.
	MaxMessageChars = 16_000
	// MaxMessagesPerTurn bounds the messages of one turn.
	MaxMessagesPerTurn = 20
)

// MessageTool is nanobot's message tool: send a message to the current
// chat now, or to another chat that AllowTo lists. Sent messages are
// committed with the turn.
//
// Other chats only by name: the model follows whatever text it reads
// (a fetched page, a file, another user's message in a group), and the
// bot's account reaches every chat of every user.
type MessageTool struct {
	// AllowTo lists the other chats a session may message (the worker's
	// messageAllowTo): "channel:chat", "channel:*" or "*".
	AllowTo []string
}

// Tool describes the message tool.
func (MessageTool) Tool() toolschema.Tool {
	return toolschema.Tool{
		Name:        "message",
		Description: "Send a message to the user now (or to another channel/chat the configuration allows). If you message the current chat, your final answer is not sent again.",
		Parameters: json.RawMessage(`{"type":"object","properties":{
			"content":{"type":"string","minLength":1,"maxLength":` + strconv.Itoa(MaxMessageChars) + `,"description":"The message text"},
			"channel":{"type":"string","description":"Target channel; default the current one"},
			"chat_id":{"type":"string","description":"Target chat id; default the current one"}},
			"required":["content"],"additionalProperties":false}`),
	}
}

// Call sends the message.
func (m MessageTool) Call(_ context.Context, tc *TurnContext, args map[string]any) (string, error) {
	content, _ := args["content"].(string)
	channel, _ := args["channel"].(string)
	chat, _ := args["chat_id"].(string)
	if channel != "" && chat == "" {
		return "", errors.New("chat_id is required when channel is given")
	}
	in := tc.Inbound
	toChannel, toChat := cmp.Or(channel, in.GetChannel()), cmp.Or(chat, in.GetChatId())
	if (toChannel != in.GetChannel() || toChat != in.GetChatId()) && !MessageAllowed(m.AllowTo, toChannel, toChat) {
		return "", fmt.Errorf("messaging %s:%s is not allowed: a session messages its own chat, and the chats worker.messageAllowTo lists", toChannel, toChat)
	}
	if err := tc.Send(channel, chat, content); err != nil {
		return "", err
	}
	target := "the current chat"
	if channel != "" || chat != "" {
		target = toChannel + ":" + toChat
	}
	return "Message sent to " + target + ".", nil
}

// MessageAllowed reports whether allowTo ("channel:chat", "channel:*",
// "*") lets a session message chat on channel.
func MessageAllowed(allowTo []string, channel, chat string) bool {
	for _, a := range allowTo {
		ch, c, _ := strings.Cut(a, ":")
		if a == "*" || (ch == channel && (c == "*" || c == chat)) {
			return true
		}
	}
	return false
}
