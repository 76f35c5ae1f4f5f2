package telegram

import (
	"context"
	"crypto/subtle"
	"net/http"

	tgbot "github.com/go-telegram/bot"

	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/retry"
)

// runWebhook registers the webhook and waits; updates arrive through
// [Adapter.WebhookHandler].
func (a *Adapter) runWebhook(ctx context.Context) error {
	err := retry.Until(ctx, a.log, "setWebhook failed, retrying", func(ctx context.Context) error {
		_, err := a.bot.SetWebhook(ctx, &tgbot.SetWebhookParams{
			URL: a.cfg.Webhook.URL, SecretToken: a.cfg.Webhook.Secret, AllowedUpdates: []string{"message"},
		})
		return err
	}, retry.WithStatus(a.deps.Status, Channel))
	if err != nil { // only ctx ends it
		return nil
	}
	a.log.Info("telegram webhook set", "url", a.cfg.Webhook.URL)
	a.deps.Status.Serving(ctx, a.log, Channel, "@"+a.username())
	<-ctx.Done()
	return nil
}

// WebhookHandler receives updates Telegram posts. Requests without the
// configured secret token are refused; malformed updates are logged and
// acknowledged so that Telegram does not send them again.
func (a *Adapter) WebhookHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		got := r.Header.Get("X-Telegram-Bot-Api-Secret-Token")
		if subtle.ConstantTimeCompare([]byte(got), []byte(a.cfg.Webhook.Secret)) != 1 || a.cfg.Webhook.Secret == "" {
			a.forged.Warn("telegram webhook request with a wrong secret token", "remote", r.RemoteAddr)
			http.Error(w, "forbidden", http.StatusUnauthorized)
			return
		}
		ctx, in, raw, ok := a.hook.Accept(w, r)
		if !ok {
			return
		}
		id, upd, err := decodeUpdate(raw)
		if err != nil {
			a.log.Warn("dropping malformed Telegram update", "update_id", id, "err", err, "raw", observe.Excerpt(raw))
			w.WriteHeader(http.StatusOK)
			return
		}
		if err := a.handle(ctx, in, upd); err != nil {
			a.log.Warn("could not handle webhook update", "update_id", id, "err", err)
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}
