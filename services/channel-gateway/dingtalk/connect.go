package dingtalk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/coder/websocket"
	"github.com/open-dingtalk/dingtalk-stream-sdk-go/payload"
	"github.com/open-dingtalk/dingtalk-stream-sdk-go/utils"

	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/eventsocket"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/hold"
)

// Run holds the stream connection while this gateway holds the fleet's
// lease for the app, until ctx ends. The status board names the robot by
// its robot code, the name DingTalk's robot API knows it by.
func (a *Adapter) Run(ctx context.Context, in gateway.Inbox) error {
	stopStreams, err := a.streams.Watch(ctx)
	if err != nil {
		return err
	}
	defer stopStreams()
	return hold.Run(ctx, a.deps.Bus, hold.Key(Channel, a.api+"/"+a.cfg.ClientID), a.log, func(ctx context.Context) error {
		return a.connect(ctx, in)
	}, hold.WithAccount(a.cfg.robotCode()), hold.WithStatus(a.deps.Status))
}

// The stream connection is held here rather than by the SDK's
// StreamClient: that client reconnects on its own with a background
// context, handles frames concurrently (out of order) with no context,
// and logs through a package-level logger, so a gateway could neither
// stop it when it loses the lease nor keep messages in order. The frames
// and the endpoint request are the SDK's own types.

// userAgent names the client to the stream gateway.
const userAgent = "nanofleet (dingtalk-stream-sdk-go/v0.9.1 frames)"

// keepAlive is how long the connection may be idle before a WebSocket
// ping checks it, as the SDK does.
const keepAlive = 60 * time.Second

// open asks the stream gateway for a connection ticket.
func (a *Adapter) open(ctx context.Context) (string, error) {
	body, _ := json.Marshal(payload.ConnectionEndpointRequest{
		ClientId: a.cfg.ClientID, ClientSecret: a.cfg.ClientSecret, UserAgent: userAgent,
		Subscriptions: []*payload.SubscriptionModel{
			{Type: utils.SubscriptionTypeKSystem, Topic: "ping"},
			{Type: utils.SubscriptionTypeKSystem, Topic: "disconnect"},
			{Type: utils.SubscriptionTypeKCallback, Topic: payload.BotMessageCallbackTopic},
		},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.api+utils.GetConnectionEndpointAPIUrl, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("open connection: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("open connection: %w", err)
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		return "", &hold.Fatal{Err: fmt.Errorf("dingtalk: client credentials rejected: %s: %s", resp.Status, observe.Excerpt(raw))}
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("open connection: %s: %s", resp.Status, observe.Excerpt(raw))
	}
	var ep payload.ConnectionEndpointResponse
	if err := json.Unmarshal(raw, &ep); err != nil {
		return "", fmt.Errorf("open connection: %w", err)
	}
	if err := ep.Valid(); err != nil {
		return "", fmt.Errorf("open connection: %w", err)
	}
	return ep.Endpoint + "?ticket=" + url.QueryEscape(ep.Ticket), nil
}

// connect holds one stream connection until ctx ends, it breaks, or the
// gateway asks to disconnect. Frames are handled one at a time, in order;
// a robot message is acknowledged after it was stored (or found
// malformed), so one lost with the gateway is sent again.
func (a *Adapter) connect(ctx context.Context, in gateway.Inbox) error {
	addr, err := a.open(ctx)
	if err != nil {
		return err
	}
	conn, err := eventsocket.Dial(ctx, addr)
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	a.log.Info("dingtalk stream connected")

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	activity := make(chan struct{}, 1)
	go a.keepAlive(ctx, conn, activity)
	for {
		kind, data, err := conn.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("read: %w", err)
		}
		select {
		case activity <- struct{}{}:
		default:
		}
		if kind != websocket.MessageText {
			continue
		}
		df, err := payload.DecodeDataFrame(data)
		if err != nil || df.Headers == nil {
			a.log.Warn("dropping malformed DingTalk frame", "err", err, "raw", observe.Excerpt(data))
			continue
		}
		ack := payload.NewSuccessDataFrameResponse()
		switch {
		case df.Type == utils.SubscriptionTypeKSystem && df.GetTopic() == "ping":
			ack = payload.NewDataFrameAckPong(df.GetMessageId())
			ack.Data = df.Data
		case df.Type == utils.SubscriptionTypeKSystem && df.GetTopic() == "disconnect":
			a.log.Info("dingtalk stream gateway asked to reconnect")
			return nil
		case df.Type == utils.SubscriptionTypeKCallback && df.GetTopic() == payload.BotMessageCallbackTopic:
			if err := a.onMessage(ctx, in, []byte(df.Data)); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				a.log.Error("dingtalk message not stored; the platform will send it again", "err", err)
				ack = payload.NewErrorDataFrameResponse(err)
			}
		default:
			ack = payload.NewDataFrameResponse(payload.DataFrameResponseStatusCodeKHandlerNotFound)
		}
		ack.SetHeader(payload.DataFrameHeaderKMessageId, df.GetMessageId())
		ack.SetHeader(payload.DataFrameHeaderKContentType, payload.DataFrameContentTypeKJson)
		if err := eventsocket.Write(ctx, conn, websocket.MessageText, ack.Encode()); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("acknowledge: %w", err)
		}
	}
}

// keepAlive pings when the connection was idle for keepAlive and closes
// it when the ping is not answered, so the read loop reconnects.
func (a *Adapter) keepAlive(ctx context.Context, conn *websocket.Conn, activity <-chan struct{}) {
	t := time.NewTimer(keepAlive)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-activity:
			t.Reset(keepAlive)
			continue
		case <-t.C:
		}
		if err := eventsocket.Ping(ctx, conn); err != nil {
			if ctx.Err() == nil {
				a.log.Warn("dingtalk stream ping unanswered; reconnecting", "err", err)
				_ = conn.CloseNow()
			}
			return
		}
		t.Reset(keepAlive)
	}
}
