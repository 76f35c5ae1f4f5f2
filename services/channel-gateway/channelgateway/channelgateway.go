// Package channelgateway assembles a channel-gateway from the fleet's config: the
// enabled channels, the delivery core and the HTTP listener of the web
// chat, the OpenAI-compatible API and webhooks. The channel-gateway binary
// and the all-in-one use it.
package channelgateway

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/every"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/connlimit"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

// Deps are what the process gives the gateway besides the config file.
type Deps struct {
	// Bus is the fleet's connection; the layout and channels.Assets must
	// have been provisioned.
	Bus *bus.Bus
	// Listen overrides channels.web.listen.
	Listen string
	// DefaultListen is used when neither Listen nor channels.web.listen
	// says; empty means ":8080".
	DefaultListen string
	Metrics       *observe.Metrics
	Announce      func(line string)
	// Storage, when set, says whether the fleet's store has room: while
	// it returns an error, new messages are refused as storage full.
	Storage func() error
}

// Option changes an optional setting of [New].
type Option func(*Gateway)

// WithLogger sets the gateway's logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(gw *Gateway) { gw.log = observe.OrDiscard(l) } }

// DefaultReadTimeout is how long a request (headers and body) may take to
// arrive on the gateway's listener, and how long an idle connection is
// kept; an upload at the web chat's 10 MB limit needs 170 KB/s.
const DefaultReadTimeout = time.Minute

// WithReadTimeout sets how long a request may take to arrive, and an idle
// connection is kept (default [DefaultReadTimeout]); zero or less keeps
// the default.
func WithReadTimeout(d time.Duration) Option {
	return func(gw *Gateway) {
		if d > 0 {
			gw.readTimeout = d
		}
	}
}

// MaxHeaderBytes bounds a request's header on the gateway's listener.
// net/http's default, 1 MB, let anyone who reaches the port make the
// process hold a megabyte per connection before any login is checked:
// 2,000 connections sending 1 MB of headers each within the header
// timeout took the all-in-one from 62 MB to 1.5 GB RSS. 64 KiB is four
// times Node's default and twice nginx's largest, room for any cookies a
// browser sends.
const MaxHeaderBytes = 64 << 10

// defaultMaxConnections caps the default of channels.web.maxConnections
// (half the process's file descriptors): far above what a personal or a
// team assistant's page and API see, and each open connection costs a
// goroutine and its buffers.
const defaultMaxConnections = 10_000

// Gateway is an assembled gateway; its HTTP listener is bound.
type Gateway struct {
	nc   *nats.Conn
	id   string
	g    *gateway.Gateway
	srv  *http.Server
	ln   net.Listener
	log  *slog.Logger
	addr string
	// channels are the enabled ones, announced with the gateway.
	channels []string
	// status writes the gateway's channel status records, under id.
	status *status.Reporter

	readTimeout time.Duration
}

// New builds the gateway and binds its HTTP listener, so that a taken port
// fails at start-up.
func New(ctx context.Context, file *config.File, o Deps, opts ...Option) (*Gateway, error) {
	gw := &Gateway{log: slog.New(slog.DiscardHandler), readTimeout: DefaultReadTimeout}
	for _, opt := range opts {
		opt(gw)
	}
	b := o.Bus
	chans, err := channels.FromFile(file)
	if err != nil {
		return nil, err
	}
	addr := cmp.Or(o.Listen, chans.Web.Listen, o.DefaultListen, ":8080")
	// Bound before the channels are built, so that the links they print
	// carry the real port (":0" picks one) and a taken port fails first.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("channel-gateway: listen %s (channels.web.listen or --listen): %w", addr, err)
	}
	// The id the gateway announces in discovery and writes its status
	// records as: where it runs, and a random tail for several gateways
	// in one process (tests, the bench).
	gw.id = fleetstatus.DefaultID() + "-" + rand.Text()[:6]
	board, err := status.Open(ctx, b)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("channel-gateway: %w", err)
	}
	gw.status = board.Reporter(gw.id)
	gcfg := gateway.DefaultConfig()
	gcfg.MaxContentBytes = gateway.ContentLimit(file.Agents.Defaults.ContextWindowTokens)
	adapters, handler, err := channels.Build(ctx, chans, channels.Deps{Bus: b, Listen: ln.Addr().String(), Announce: o.Announce,
		Storage: o.Storage, MaxContentBytes: gcfg.MaxContentBytes, Status: gw.status}, channels.WithLogger(gw.log))
	if err != nil {
		ln.Close()
		return nil, err
	}
	g, err := gateway.New(gcfg, b, adapters, gateway.WithLogger(gw.log), gateway.WithStatus(gw.status))
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("channel-gateway: %w", err)
	}
	g.Storage = o.Storage
	if m := o.Metrics; m != nil {
		g.OnRetry = func(ch string) { m.DeliveryRetries.WithLabelValues(ch).Inc() }
		g.OnDeadLetter = func(string) { m.DeadLetters.WithLabelValues("outbound").Inc() }
	}
	gw.nc, gw.g, gw.addr, gw.channels = b.NC, g, addr, chans.Enabled()
	if handler == nil {
		ln.Close()
		return gw, nil
	}
	limit := chans.Web.MaxConnections
	if limit == 0 {
		limit = connlimit.DefaultLimit(defaultMaxConnections)
	}
	refusals := observe.NewThrottled(gw.log, time.Minute)
	gw.ln = connlimit.New(ln, limit, func() {
		if m := o.Metrics; m != nil {
			m.HTTPConnectionsRefused.Inc()
		}
		refusals.Warn("HTTP connection refused: too many open (channels.web.maxConnections)", "limit", limit)
	})
	// ReadTimeout bounds a request's body too, and so the idle wait for
	// the next request: without it, a client that declared a body and
	// never sent it held its connection and a goroutine for good, on any
	// route and before any login (the server reads what a handler left
	// unread before it answers), and so did an idle keep-alive. net/http
	// lifts the deadline once the body is read (and on a WebSocket's
	// hijack), so it never ends a long answer.
	gw.srv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: gw.readTimeout,
		MaxHeaderBytes: MaxHeaderBytes}
	return gw, nil
}

// Addr is the HTTP listener's address, or nil without one.
func (gw *Gateway) Addr() net.Addr {
	if gw.ln == nil {
		return nil
	}
	return gw.ln.Addr()
}

// Run serves until ctx ends, then shuts the HTTP server down and
// withdraws the gateway's channel status records. A gateway whose
// adapter failed leaves its records, its last word, to expire: readers
// show them as a gateway's that is gone.
func (gw *Gateway) Run(ctx context.Context) error {
	stop, err := fleetstatus.Register(ctx, gw.nc, fleetstatus.GatewayService, gw.id, fleetstatus.WithChannels(gw.channels))
	if err != nil {
		return err
	}
	defer stop()
	stopRefresh := every.Go(ctx, status.RefreshEvery, func() bool {
		gw.status.Refresh(ctx, gw.log)
		return true
	})
	defer stopRefresh()
	if gw.srv != nil {
		go func() {
			if err := gw.srv.Serve(gw.ln); !errors.Is(err, http.ErrServerClosed) {
				gw.log.Error("http server stopped", "listen", gw.addr, "err", err)
			}
		}()
	}
	err = gw.g.Run(ctx)
	if err == nil {
		<-ctx.Done() // without platform adapters Run returns at once; keep serving HTTP
	}
	if gw.srv != nil {
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = gw.srv.Shutdown(shutdown)
	}
	if err == nil {
		stopRefresh()
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bus.CallTimeout)
		defer cancel()
		if werr := gw.status.Withdraw(wctx); werr != nil {
			gw.log.Warn("withdraw channel status", "err", werr)
		}
	}
	return err
}
