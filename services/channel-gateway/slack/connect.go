package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/retry"
)

// Run holds a Socket Mode connection until ctx ends, reconnecting as Slack
// asks, and publishes the events that pass the policies.
func (a *Adapter) Run(ctx context.Context, in gateway.Inbox) error {
	if err := a.identify(ctx); err != nil {
		return err
	}
	// Slack spreads events over every Socket Mode connection of the app,
	// so every gateway connects and none holds a lease.
	a.deps.Status.Serving(ctx, a.log, Channel, a.botName)
	stopStreams, err := a.streams.Watch(ctx)
	if err != nil {
		return err
	}
	defer stopStreams()
	sm := socketmode.New(a.api, socketmode.OptionPingInterval(a.pingEvery), socketmode.OptionLog(logAdapter{a.log}))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- sm.RunContext(ctx) }()
	for {
		select {
		case err := <-ran:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("slack socket mode: %w", err)
		case evt := <-sm.Events:
			a.dispatch(ctx, sm, in, evt)
		}
	}
}

// identify asks Slack for the bot's user id (for mentions), retrying
// until it answers or ctx ends.
func (a *Adapter) identify(ctx context.Context) error {
	return retry.Until(ctx, a.log, "slack auth.test failed, retrying", func(ctx context.Context) error {
		res, err := a.api.AuthTestContext(ctx)
		var se slack.SlackErrorResponse
		if errors.As(err, &se) && (se.Err == "invalid_auth" || se.Err == "not_authed" || se.Err == "token_revoked" || se.Err == "account_inactive") {
			return retry.Final(fmt.Errorf("slack: bot token rejected: %w", err))
		}
		if err != nil {
			return err
		}
		a.mu.Lock()
		a.botID, a.botName = res.UserID, "@"+res.User
		a.mu.Unlock()
		a.log.Info("slack bot ready", "user", res.User, "user_id", res.UserID, "team", res.Team)
		return nil
	}, retry.WithStatus(a.deps.Status, Channel))
}

// dispatch acknowledges an envelope first, then handles it.
func (a *Adapter) dispatch(ctx context.Context, sm *socketmode.Client, in gateway.Inbox, evt socketmode.Event) {
	switch evt.Type {
	case socketmode.EventTypeEventsAPI:
		if evt.Request == nil {
			return
		}
		if err := sm.AckCtx(ctx, evt.Request.EnvelopeID, nil); err != nil {
			a.log.Warn("slack ack failed", "envelope", evt.Request.EnvelopeID, "err", err)
		}
		if err := a.onEvent(ctx, in, evt.Request.Payload); err != nil && ctx.Err() == nil {
			a.log.Error("slack event not published", "envelope", evt.Request.EnvelopeID, "err", err)
		}
	case socketmode.EventTypeSlashCommand, socketmode.EventTypeInteractive:
		if evt.Request != nil {
			_ = sm.AckCtx(ctx, evt.Request.EnvelopeID, nil)
		}
	case socketmode.EventTypeErrorBadMessage:
		bad, _ := evt.Data.(*socketmode.ErrorBadMessage)
		if bad == nil {
			return
		}
		a.log.Warn("dropping malformed Slack envelope", "err", bad.Cause, "raw", observe.Excerpt(bad.Message))
		var env struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if json.Unmarshal(bad.Message, &env) == nil && env.EnvelopeID != "" {
			_ = sm.AckCtx(ctx, env.EnvelopeID, nil) // so Slack does not resend it
		}
	case socketmode.EventTypeConnected:
		a.log.Info("slack socket mode connected")
	case socketmode.EventTypeConnectionError:
		a.log.Warn("slack socket mode connection failed", "data", fmt.Sprint(evt.Data))
	case socketmode.EventTypeInvalidAuth:
		a.log.Error("slack app token rejected")
	}
}
