// Package agenttool defines the tools and slash commands that run inside an
// agent worker because they act on the fleet rather than on a workspace:
// message, spawn, cron, memory_search, /dream-log, /pairing. Services
// provide implementations; the worker runs them within a turn.
package agenttool

import (
	"context"

	"github.com/nanofleet/nanofleet/pkg/slashcmd"

	"github.com/nanofleet/nanofleet/pkg/toolschema"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Tool is a tool that runs inside the worker.
type Tool interface {
	Tool() toolschema.Tool
	// Call runs the tool with arguments already validated against its
	// schema; an error is shown to the model as the result.
	Call(ctx context.Context, tc *TurnContext, args map[string]any) (string, error)
}

// Command is a slash command. It runs without the model and its answer is
// the turn's reply.
type Command interface {
	// Describe gives the command as /help and command menus show it:
	// its entry of [slashcmd], where every command is listed.
	Describe() slashcmd.Command
	Run(ctx context.Context, tc *TurnContext, args []string) (string, error)
}

// TurnContext is what a tool or command may know and do about its turn.
type TurnContext struct {
	SessionKey string
	TurnID     string
	// InboundSeq is the inbound stream sequence of the turn's message.
	InboundSeq uint64
	Inbound    *nanofleetv1.InboundMessage
	// Send adds a durable message to the turn's replies, committed with
	// the turn. Sending to the origin chat suppresses the final answer.
	// It fails when the turn may send no more; the error is for the
	// model.
	Send func(channel, chatID, text string) error
}
