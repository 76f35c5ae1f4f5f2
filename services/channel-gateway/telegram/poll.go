package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	tgbot "github.com/go-telegram/bot"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/hold"
)

// pollerKey is the lease key of a bot's poller; the token is hashed so
// that it never appears in the bucket. It predates hold.Key and is kept so
// that gateways of earlier releases still exclude each other from polling.
func pollerKey(token string) string { return "telegram-poller-" + hold.Hash(token) }

// runPolling polls while this gateway holds the bot's poller lease,
// waiting while another gateway holds it (see internal/hold).
func (a *Adapter) runPolling(ctx context.Context, in gateway.Inbox) error {
	return hold.Run(ctx, a.deps.Bus, pollerKey(a.cfg.Token), a.log.With("bot", a.username()), func(ctx context.Context) error {
		a.poll(ctx, in)
		return nil
	}, hold.WithAccount("@"+a.username()), hold.WithStatus(a.deps.Status))
}

// poll long-polls getUpdates until ctx ends. An update is confirmed to
// Telegram (by the next offset) only after it was handled, so an update
// that could not be published is fetched again.
func (a *Adapter) poll(ctx context.Context, in gateway.Inbox) {
	if _, err := a.bot.DeleteWebhook(ctx, &tgbot.DeleteWebhookParams{}); err != nil && ctx.Err() == nil {
		a.log.Warn("deleteWebhook before polling", "err", err)
	}
	var offset int64
	// Failed polls wait as Telegram asks, else by a backoff from 200 ms
	// to 5 s.
	pace := backoff.Backoff{Min: 200 * time.Millisecond, Max: 5 * time.Second}
	wait, failed := time.Duration(0), 0
	for ctx.Err() == nil {
		if wait > 0 && backoff.Sleep(ctx, wait) != nil {
			return
		}
		raws, err := a.getUpdates(ctx, offset)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			wait = pollWait(err, pace, failed)
			failed++
			a.log.Warn("getUpdates failed", "err", err, "retry_in", wait)
			continue
		}
		wait, failed = 0, 0
	batch:
		for _, raw := range raws {
			id, upd, err := decodeUpdate(raw)
			if err != nil {
				a.log.Warn("dropping malformed Telegram update", "update_id", id, "err", err, "raw", observe.Excerpt(raw))
				if id >= offset {
					offset = id + 1
				}
				continue
			}
			if err := a.handle(ctx, in, upd); err != nil {
				if ctx.Err() != nil {
					return
				}
				a.log.Warn("could not handle update; fetching it again", "update_id", id, "err", err)
				wait = time.Second
				break batch
			}
			offset = id + 1
		}
	}
}

// pollWait is the wait before the next poll after the failed-th failure
// in a row, err: what Telegram asks (retry_after), else pace's.
func pollWait(err error, pace backoff.Backoff, failed int) time.Duration {
	var api *apiError
	if errors.As(err, &api) && api.RetryAfter > 0 {
		return config.SecondsDuration(api.RetryAfter)
	}
	return pace.Wait(failed)
}

// getUpdates calls the Bot API directly rather than through the library:
// the updates come back as raw JSON, so one malformed update is skipped
// instead of failing the whole batch forever.
func (a *Adapter) getUpdates(ctx context.Context, offset int64) ([]json.RawMessage, error) {
	body, _ := json.Marshal(map[string]any{
		"offset":          offset,
		"timeout":         int(a.pollTimeout.Seconds()),
		"allowed_updates": []string{"message"},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.apiBase+"/bot"+a.cfg.Token+"/getUpdates", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, errors.New("getUpdates: " + redact(err.Error(), a.cfg.Token))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, fmt.Errorf("getUpdates: read: %w", err)
	}
	var r struct {
		OK          bool              `json:"ok"`
		Result      []json.RawMessage `json:"result"`
		ErrorCode   int               `json:"error_code"`
		Description string            `json:"description"`
		Parameters  struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("getUpdates: %s: malformed response: %w", resp.Status, err)
	}
	if !r.OK {
		return nil, &apiError{Code: r.ErrorCode, Description: r.Description, RetryAfter: r.Parameters.RetryAfter}
	}
	return r.Result, nil
}

func redact(s, token string) string {
	return string(bytes.ReplaceAll([]byte(s), []byte(token), []byte("***")))
}
