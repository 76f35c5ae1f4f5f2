package channels

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/subject"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/dashboard"
	"github.com/nanofleet/nanofleet/services/channel-gateway/dingtalk"
	"github.com/nanofleet/nanofleet/services/channel-gateway/discord"
	"github.com/nanofleet/nanofleet/services/channel-gateway/feishu"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adapterdeps"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/editstream"
	"github.com/nanofleet/nanofleet/services/channel-gateway/openaiapi"
	"github.com/nanofleet/nanofleet/services/channel-gateway/slack"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
	"github.com/nanofleet/nanofleet/services/channel-gateway/telegram"
	"github.com/nanofleet/nanofleet/services/channel-gateway/webchat"
	"github.com/nanofleet/nanofleet/services/channel-gateway/whatsapp"
)

// bucketSecrets is the short name of the bucket of generated secrets.
const bucketSecrets = "gateway"

// Assets declares the JetStream assets of the gateway and its channels
// for [bus.Provision]. A channel adapter that keeps state in JetStream
// exports its own Assets and is added here.
func Assets(sp subject.Space, l bus.Layout) bus.Assets {
	return bus.Join(gateway.Assets, access.Assets, webchat.Assets, secretsAssets, editstream.Assets,
		status.Assets, discord.Assets, feishu.Assets, whatsapp.Assets)(sp, l)
}

// secretsAssets declares the bucket of secrets the gateway generates at
// first start (the web chat's token), shared by every gateway.
func secretsAssets(sp subject.Space, l bus.Layout) bus.Assets {
	return bus.KeyValue(jetstream.KeyValueConfig{
		Bucket: bucketSecrets, Description: "gateway secrets generated at first start", History: 1,
	})(sp, l)
}

// Deps are what [Build] needs from the process.
type Deps struct {
	// Bus is the fleet's connection; the layout and [Assets] must be
	// provisioned.
	Bus *bus.Bus
	// Listen is the address the returned handler will be served on, for
	// the login link the web chat prints (e.g. ":8080").
	Listen string
	// Announce, when set, receives the lines a person starting the
	// gateway needs to see (login link, API base URL) besides the log.
	Announce func(line string)
	// Storage, when set, says whether the fleet's store has room; see
	// gateway.Gateway.Storage.
	Storage func() error
	// MaxContentBytes bounds an inbound message's text (default
	// gateway.MaxContentBytes); see gateway.ContentLimit.
	MaxContentBytes int
	// Status writes the gateway's channel status records; nil reports
	// nothing.
	Status *status.Reporter
}

// webhooks is an adapter that can take its platform's events by webhook
// (Telegram, Feishu): when configured to, it serves them at path.
type webhooks interface {
	Webhook() (path string, ok bool)
	WebhookHandler() http.Handler
}

// Option changes an optional setting of [Build].
type Option func(*options)

type options struct{ log *slog.Logger }

// WithLogger sets the logger the channels log to; the default discards.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = observe.OrDiscard(l) } }

// Build constructs the enabled channels: the adapters to pass to
// [gateway.New], and the handler to serve on the gateway's HTTP listener
// (nil when no enabled channel needs HTTP). It logs the web chat's login
// link and the API's base URL.
func Build(ctx context.Context, cfg Config, deps Deps, opts ...Option) ([]gateway.Adapter, http.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	o := options{log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	log := o.log
	progress, hints := channelconfig.On(cfg.SendProgress, true), channelconfig.On(cfg.SendToolHints, false)
	gate, err := access.Open(ctx, deps.Bus, access.WithLogger(log.With("component", "access")))
	if err != nil {
		return nil, nil, err
	}
	ad := adapterdeps.Deps{Bus: deps.Bus, Gate: gate, Status: deps.Status, SendProgress: progress, SendToolHints: hints}
	var adapters []gateway.Adapter
	mux := http.NewServeMux()
	serving := false

	// The enabled adapters in this order; one that takes webhooks gets its
	// route on the mux.
	for _, c := range []struct {
		enabled bool
		build   func() (gateway.Adapter, error)
	}{
		{cfg.Telegram.Enabled, func() (gateway.Adapter, error) { return telegram.New(ctx, cfg.Telegram, ad, telegram.WithLogger(log)) }},
		{cfg.Slack.Enabled, func() (gateway.Adapter, error) { return slack.New(ctx, cfg.Slack, ad, slack.WithLogger(log)) }},
		{cfg.Discord.Enabled, func() (gateway.Adapter, error) { return discord.New(ctx, cfg.Discord, ad, discord.WithLogger(log)) }},
		{cfg.Feishu.Enabled, func() (gateway.Adapter, error) { return feishu.New(ctx, cfg.Feishu, ad, feishu.WithLogger(log)) }},
		{cfg.DingTalk.Enabled, func() (gateway.Adapter, error) { return dingtalk.New(ctx, cfg.DingTalk, ad, dingtalk.WithLogger(log)) }},
		{cfg.WhatsApp.Enabled, func() (gateway.Adapter, error) { return whatsapp.New(ctx, cfg.WhatsApp, ad, whatsapp.WithLogger(log)) }},
	} {
		if !c.enabled {
			continue
		}
		a, err := c.build()
		if err != nil {
			return nil, nil, err
		}
		adapters = append(adapters, a)
		if w, ok := a.(webhooks); ok {
			if path, ok := w.Webhook(); ok {
				mux.Handle("POST "+path, w.WebhookHandler())
				serving = true
			}
		}
	}
	if !cfg.Web.Enabled && !cfg.API.Enabled {
		if !serving {
			return adapters, nil, nil
		}
		return adapters, mux, nil
	}

	// The web chat and the API answer on connections they hold, so they
	// publish directly rather than through a gateway adapter.
	gcfg := gateway.DefaultConfig()
	if deps.MaxContentBytes > 0 {
		gcfg.MaxContentBytes = deps.MaxContentBytes
	}
	inbox, err := gateway.New(gcfg, deps.Bus, nil, gateway.WithLogger(log))
	if err != nil {
		return nil, nil, err
	}
	inbox.Storage = deps.Storage
	secrets, err := deps.Bus.KV(ctx, bucketSecrets)
	if err != nil {
		return nil, nil, fmt.Errorf("channels: %w", err)
	}
	if c := cfg.Web; c.Enabled {
		if c.Token == "" {
			if c.Token, err = sharedToken(ctx, secrets, "web-token"); err != nil {
				return nil, nil, err
			}
		}
		store, err := session.Open(ctx, deps.Bus)
		if err != nil {
			return nil, nil, fmt.Errorf("channels: %w", err)
		}
		// The page folds hints away, so it shows them unless told otherwise.
		webHints := channelconfig.On(cfg.SendToolHints, true)
		w, err := webchat.New(ctx, c, webchat.Deps{Bus: deps.Bus, Inbox: inbox, Sessions: store, SendProgress: progress, SendToolHints: webHints}, webchat.WithLogger(log))
		if err != nil {
			return nil, nil, err
		}
		mux.Handle("/", w)
		deps.Status.Serving(ctx, log, "web", webchat.BaseURL(c.PublicURL, deps.Listen))
		log.Info("web chat ready: open this link to log in", "url", w.LoginURL(deps.Listen))
		// The fleet dashboard shares the web chat's login.
		dash, err := dashboard.New(dashboard.Config{}, dashboard.Deps{Bus: deps.Bus, Gate: w}, dashboard.WithLogger(log.With("component", "dashboard")))
		if err != nil {
			return nil, nil, err
		}
		mux.Handle("/dashboard", dash)
		mux.Handle("/dashboard/", dash)
		log.Info("fleet dashboard ready (same login as the web chat)", "url", webchat.BaseURL(c.PublicURL, deps.Listen)+"/dashboard")
		if deps.Announce != nil {
			deps.Announce("web chat: " + w.LoginURL(deps.Listen) + " (this link logs you in; channels.web.token sets its token)")
			deps.Announce("dashboard: " + webchat.BaseURL(c.PublicURL, deps.Listen) + "/dashboard (same login as the web chat)")
		}
	}
	if c := cfg.API; c.Enabled {
		if c.Token == "" {
			if c.Token, err = sharedToken(ctx, secrets, "api-token"); err != nil {
				return nil, nil, err
			}
		}
		api, err := openaiapi.New(c, openaiapi.Deps{Bus: deps.Bus, Inbox: inbox, Storage: deps.Storage}, openaiapi.WithLogger(log))
		if err != nil {
			return nil, nil, err
		}
		mux.Handle("/v1/", api)
		base := webchat.BaseURL(cfg.Web.PublicURL, deps.Listen) + "/v1"
		deps.Status.Serving(ctx, log, "api", base)
		log.Info("OpenAI-compatible API ready", "base_url", base, "api_key", api.Token())
		if deps.Announce != nil {
			deps.Announce("OpenAI-compatible API: " + base + " (api key " + api.Token() + ") — channels.api.token sets the key")
		}
	}
	return adapters, mux, nil
}

// sharedToken returns the token called name from the secrets bucket,
// creating it on first use; every gateway gets the same one.
func sharedToken(ctx context.Context, kv jetstream.KeyValue, name string) (string, error) {
	for range 3 {
		e, err := bus.Get(ctx, kv, name)
		if err == nil {
			return string(e.Value()), nil
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return "", fmt.Errorf("channels: read %s: %w", name, err)
		}
		tok := "nf-" + rand.Text()
		if _, err := kv.Create(ctx, name, []byte(tok)); err == nil {
			return tok, nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) {
			return "", fmt.Errorf("channels: store %s: %w", name, err)
		}
	}
	return "", fmt.Errorf("channels: could not settle %s", name)
}
