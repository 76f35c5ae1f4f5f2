package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/disgoorg/disgo/gateway"
	"github.com/disgoorg/disgo/rest"
	"github.com/gorilla/websocket"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/hold"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/retry"
)

// intents are what the adapter asks Discord for: messages in guilds and
// DMs, with their content (a privileged intent, to be enabled in the
// developer portal).
var intents = []gateway.Intents{gateway.IntentGuildMessages, gateway.IntentDirectMessages, gateway.IntentMessageContent}

// Run receives gateway events until ctx ends, while holding the fleet's
// connection lease for this bot (waiting while another gateway holds it;
// see internal/hold).
func (a *Adapter) Run(ctx context.Context, in inbox) error {
	wsURL, account, err := a.discover(ctx)
	if err != nil {
		return err
	}
	stop, err := a.typing.Watch(ctx)
	if err != nil {
		return err
	}
	defer stop()
	stopStreams, err := a.streams.Watch(ctx)
	if err != nil {
		return err
	}
	defer stopStreams()
	return hold.Run(ctx, a.deps.Bus, hold.Key(Channel, a.cfg.Token), a.log, func(ctx context.Context) error {
		return a.connect(ctx, in, wsURL)
	}, hold.WithAccount(account), hold.WithStatus(a.deps.Status))
}

// discover asks Discord where to connect (GET /gateway/bot), which also
// checks the token, and who the bot is (GET /users/@me), retrying until
// it answers or ctx ends. The account is the bot's tag as Discord shows
// it: name#discriminator, or the bare username once migrated to unique
// usernames.
func (a *Adapter) discover(ctx context.Context) (wsURL, account string, err error) {
	err = retry.Until(ctx, a.log, "discord REST call failed, retrying", func(ctx context.Context) error {
		var err error
		wsURL, account, err = a.ask(ctx)
		var re rest.Error
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusUnauthorized {
			return retry.Final(fmt.Errorf("discord: bot token rejected: %w", err))
		}
		return err
	}, retry.WithStatus(a.deps.Status, Channel))
	if err != nil {
		return "", "", err
	}
	return wsURL, account, nil
}

// ask makes discover's two calls once.
func (a *Adapter) ask(ctx context.Context) (wsURL, account string, err error) {
	gb, err := a.rest.GetGatewayBot(rest.WithCtx(ctx))
	if err != nil {
		return "", "", fmt.Errorf("GET /gateway/bot: %w", err)
	}
	wsURL = gb.URL
	if a.cfg.GatewayURL != "" {
		u, _ := url.Parse(a.cfg.GatewayURL) // validated
		u.RawQuery = ""                     // disgo adds v and encoding
		wsURL = u.String()
	}
	me, err := a.rest.GetCurrentUser("", rest.WithCtx(ctx)) // "": the bot token
	if err != nil {
		return "", "", fmt.Errorf("GET /users/@me: %w", err)
	}
	return wsURL, me.Tag(), nil
}

// session is what another gateway needs to resume this one's gateway
// session: Discord then replays the events after Seq.
type session struct {
	ID        string `json:"session_id"`
	Seq       int    `json:"seq"`
	ResumeURL string `json:"resume_url"`
}

// conn is one gateway connection's event handling.
type conn struct {
	a     *Adapter
	ctx   context.Context
	in    inbox
	retry chan struct{} // an event could not be published: reconnect and resume
	fatal chan error

	mu     sync.Mutex
	sess   session
	failed bool // an event was not published: later ones wait for the resume
	// g is the connection's gateway, and closed says connect has closed
	// it. disgo reconnects on its own (a dropped connection, Discord's
	// RECONNECT, a missed heartbeat) with a context nobody can cancel: a
	// reconnection under way when connect closes the gateway (the lease
	// lost, ctx ended) opens it again later, a session nobody holds,
	// resuming the one the lease's next holder resumes.
	g      gateway.Gateway
	closed bool
}

// outlived reports whether the connection should be closed and its event
// dropped: connect is done with it. It closes it then.
func (c *conn) outlived() bool {
	c.mu.Lock()
	done := c.closed || c.ctx.Err() != nil
	g := c.g
	c.mu.Unlock()
	if !done || g == nil {
		return false
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 5*time.Second)
		defer cancel()
		g.CloseWithCode(ctx, websocket.CloseServiceRestart, "superseded")
	}()
	return true
}

// connect runs gateway connections until ctx ends, resuming the last
// saved session so that no event is lost across reconnects and takeovers.
func (a *Adapter) connect(ctx context.Context, in inbox, wsURL string) error {
	// Failed connections are tried again by a backoff from a second to
	// 30 s; a connection closed after it opened is made again after a
	// second.
	open := backoff.Retry{
		Again: func(error) bool { return true },
		Wait:  backoff.Backoff{Min: time.Second, Max: 30 * time.Second}.Wait,
		Failed: func(err error, wait time.Duration) {
			a.log.Warn("discord gateway connection failed", "err", err, "retry_in", wait)
		},
	}
	for ctx.Err() == nil {
		var c *conn
		err := open.Do(ctx, func(ctx context.Context) error {
			var err error
			c, err = a.open(ctx, in, wsURL)
			return err
		})
		if err != nil {
			return nil // ctx ended: Do gives up only then
		}
		again, err := c.serve(ctx)
		if err != nil || !again {
			return err
		}
		if backoff.Sleep(ctx, time.Second) != nil {
			return nil
		}
	}
	return nil
}

// open makes one gateway connection, resuming the saved session if
// there is one.
func (a *Adapter) open(ctx context.Context, in inbox, wsURL string) (*conn, error) {
	c := &conn{a: a, ctx: ctx, in: in, retry: make(chan struct{}, 1), fatal: make(chan error, 1)}
	c.sess = a.loadSession(ctx)
	opts := []gateway.ConfigOpt{
		gateway.WithURL(wsURL),
		gateway.WithIntents(intents...),
		gateway.WithCompress(false),
		gateway.WithEnableRawEvents(true),
		gateway.WithLogger(a.log.With("source", "disgo")),
	}
	if c.sess.ID != "" {
		s := c.sess
		opts = append(opts, gateway.WithSessionID(s.ID), gateway.WithSequence(s.Seq), func(cfg *gateway.Config) {
			if s.ResumeURL != "" {
				cfg.ResumeURL = &s.ResumeURL
			}
		})
		a.log.Info("resuming Discord gateway session", "session", s.ID, "seq", s.Seq)
	}
	g := gateway.New(a.cfg.Token, c.event, func(_ gateway.Gateway, err error) {
		select {
		case c.fatal <- err:
		default:
		}
	}, opts...)
	c.mu.Lock()
	c.g = g
	c.mu.Unlock()
	return c, g.Open(ctx)
}

// serve lets c's events come until ctx ends, an event could not be
// published, or the gateway fails, and then closes the connection. again
// says to connect again (after a second); the error is one no new
// connection helps.
func (c *conn) serve(ctx context.Context) (again bool, err error) {
	var fatal error
	select {
	case <-ctx.Done():
	case <-c.retry:
		again = true
	case fatal = <-c.fatal:
	}
	c.mu.Lock()
	c.closed = true
	g := c.g
	c.mu.Unlock()
	// Not a normal closure: Discord keeps the session resumable for
	// whoever holds the lease next.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	g.CloseWithCode(cctx, websocket.CloseServiceRestart, "reconnecting")
	cancel()
	if fatal == nil {
		return again, nil
	}
	var ce *websocket.CloseError
	if errors.As(fatal, &ce) {
		return false, &hold.Fatal{Err: fmt.Errorf("discord: gateway closed the connection (%d %s); check the token and that the message content intent is enabled in the developer portal: %w", ce.Code, ce.Text, fatal)}
	}
	c.a.log.Warn("discord gateway connection ended", "err", fatal)
	return true, nil
}

// event handles one gateway event, in the order Discord sent them.
func (c *conn) event(_ gateway.EventType, seq int, _ int, data gateway.EventData) {
	if c.outlived() {
		c.a.log.Warn("discord gateway connection reopened by disgo after this gateway closed it; closing it")
		return
	}
	a := c.a
	switch ev := data.(type) {
	case gateway.EventReady:
		a.mu.Lock()
		a.botID = ev.User.ID.String()
		a.mu.Unlock()
		c.mu.Lock()
		c.sess = session{ID: ev.SessionID, Seq: seq, ResumeURL: ev.ResumeGatewayURL}
		c.mu.Unlock()
		a.log.Info("discord bot ready", "user", ev.User.Username, "id", ev.User.ID.String(), "session", ev.SessionID)
		c.save()
	case gateway.EventRaw:
		if ev.EventType != gateway.EventTypeMessageCreate {
			return
		}
		c.mu.Lock()
		failed := c.failed
		c.mu.Unlock()
		raw, err := io.ReadAll(ev.Payload)
		if failed || err != nil {
			return
		}
		if err := a.handle(c.ctx, c.in, raw); err != nil {
			c.mu.Lock()
			c.failed = true
			c.mu.Unlock()
			if c.ctx.Err() == nil {
				a.log.Warn("could not publish Discord message; reconnecting to receive it again", "seq", seq, "err", err)
				select {
				case c.retry <- struct{}{}:
				default:
				}
			}
			return
		}
		c.mu.Lock()
		c.sess.Seq = seq
		c.mu.Unlock()
		c.save()
	}
}

// save records the session and the last handled event, so that the next
// connection (on this gateway or another) resumes after it.
func (c *conn) save() {
	c.mu.Lock()
	s, failed := c.sess, c.failed
	c.mu.Unlock()
	if s.ID == "" || failed {
		return
	}
	data, _ := json.Marshal(s)
	if _, err := c.a.state.Put(c.ctx, sessionKey(c.a.cfg.Token), data); err != nil && c.ctx.Err() == nil {
		c.a.log.Warn("save Discord session position", "err", err)
	}
}

// loadSession returns the saved session, or none.
func (a *Adapter) loadSession(ctx context.Context) session {
	var s session
	e, err := bus.Get(ctx, a.state, sessionKey(a.cfg.Token))
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) && ctx.Err() == nil {
			a.log.Warn("read Discord session position", "err", err)
		}
		return s
	}
	if err := json.Unmarshal(e.Value(), &s); err != nil {
		a.log.Warn("ignoring unreadable Discord session position", "err", err)
		return session{}
	}
	return s
}

func sessionKey(token string) string { return "session-" + hold.Hash(token) }
