package webchat

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/subject"
	"github.com/nanofleet/nanofleet/pkg/textcut"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/httpjson"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/webpage"
)

// Channel is the channel name of web conversations.
const Channel = "web"

//go:embed static
var static embed.FS

// Deps are what the web chat needs from its surroundings.
type Deps struct {
	Bus *bus.Bus
	// Inbox publishes what users type.
	Inbox gateway.Inbox
	// Sessions reads conversation history.
	Sessions *session.Store
	// SendProgress and SendToolHints are the channels-wide defaults.
	SendProgress, SendToolHints bool
}

// Server is the web chat's HTTP handler.
type Server struct {
	cfg     Config
	deps    Deps
	log     *slog.Logger
	token   string
	cookie  string // the cookie value a login sets
	convs   jetstream.KeyValue
	media   *media.Store
	handler http.Handler
	show    struct{ progress, hints bool }
	// Refusals a stranger can repeat at will, logged throttled.
	wrongLogins, crossOrigin *observe.Throttled
}

// cookieName holds the login.
const cookieName = "nanofleet_web"

// bucketConversations is the short name of the conversations bucket.
const bucketConversations = "webchat"

// Assets declares the bucket of web chat conversations for
// [bus.Provision].
func Assets(sp subject.Space, l bus.Layout) bus.Assets {
	return bus.KeyValue(jetstream.KeyValueConfig{
		Bucket: bucketConversations, Description: "web chat conversations", History: 1,
	})(sp, l)
}

// Option changes an optional setting of [New].
type Option func(*Server)

// WithLogger sets the web chat's logger; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(s *Server) { s.log = observe.OrDiscard(l).With("channel", Channel) }
}

// New returns the web chat for cfg; [Assets] must have been provisioned.
func New(ctx context.Context, cfg Config, deps Deps, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, deps: deps, log: slog.New(slog.DiscardHandler), token: cfg.Token}
	for _, o := range opts {
		o(s)
	}
	if s.token == "" {
		s.token = rand.Text()
	}
	s.wrongLogins = observe.NewThrottled(s.log, observe.ThrottleEvery)
	s.crossOrigin = observe.NewThrottled(s.log, observe.ThrottleEvery)
	mac := hmac.New(sha256.New, []byte(s.token))
	mac.Write([]byte("nanofleet web session"))
	s.cookie = hex.EncodeToString(mac.Sum(nil))
	s.show.progress = channelconfig.On(cfg.SendProgress, deps.SendProgress)
	s.show.hints = channelconfig.On(cfg.SendToolHints, deps.SendToolHints)
	var err error
	s.convs, err = deps.Bus.KV(ctx, bucketConversations)
	if err != nil {
		return nil, fmt.Errorf("webchat: %w", err)
	}
	blobs, err := deps.Bus.Blobs(ctx)
	if err != nil {
		return nil, fmt.Errorf("webchat: %w", err)
	}
	limit := cfg.MaxUploadBytes
	if limit == 0 {
		limit = DefaultMaxUploadBytes
	}
	s.media = media.NewStore(blobs, limit)

	files, _ := fs.Sub(static, "static")
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", webpage.Index{Files: files, Gate: s, Home: "/",
		CSP: "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'"})
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(files)))
	mux.Handle("GET /api/web/conversations", s.auth(s.listConversations))
	mux.Handle("POST /api/web/conversations", s.auth(s.createConversation))
	mux.Handle("GET /api/web/conversations/{id}/messages", s.auth(s.messages))
	mux.Handle("POST /api/web/conversations/{id}/files", s.auth(s.upload))
	mux.Handle("GET /api/web/conversations/{id}/ws", s.auth(s.socket))
	// The login is a cookie, which a browser also sends with a form
	// another site posts here: refuse cross-origin state changes.
	cop, err := cfg.crossOrigin()
	if err != nil {
		return nil, err
	}
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.crossOrigin.Warn("cross-origin request refused", "method", r.Method, "path", r.URL.Path, "origin", r.Header.Get("Origin"))
		httpjson.Write(w, http.StatusForbidden, map[string]string{"error": "cross-origin request refused: open the web chat from its own address, or add this origin to channels.web.allowedOrigins"})
	}))
	s.handler = cop.Handler(mux)
	return s, nil
}

// Token is the access token (the configured one, or the generated one).
func (s *Server) Token() string { return s.token }

// LoginURL is the link that logs a browser in, for the gateway to print.
// listen is the address the gateway serves on, used when no public URL is
// configured.
func (s *Server) LoginURL(listen string) string {
	return BaseURL(s.cfg.PublicURL, listen) + "/?token=" + url.QueryEscape(s.token)
}

// BaseURL is publicURL without a trailing slash or, when it is empty,
// http://<host>:<port> of the listen address (localhost for a wildcard
// host).
func BaseURL(publicURL, listen string) string {
	if base := strings.TrimRight(publicURL, "/"); base != "" {
		return base
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		host, port = "localhost", "8080"
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// ServeHTTP serves the page and its API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Authorized reports whether r carries the web chat's login: its cookie
// or the token as a bearer. Other pages on the gateway's listener (the
// fleet dashboard) share the login through it.
func (s *Server) Authorized(r *http.Request) bool { return s.authorized(r) }

// LogIn checks token (from a login link) and, when it is the right one,
// sets the login cookie on w. It reports whether the token was right; the
// caller then redirects to drop the token from the address bar.
func (s *Server) LogIn(w http.ResponseWriter, r *http.Request, token string) bool {
	if subtle.ConstantTimeCompare([]byte(token), []byte(s.token)) != 1 {
		s.wrongLogins.Warn("web login with a wrong token", "remote", r.RemoteAddr, "path", r.URL.Path)
		return false
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: s.cookie, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil, MaxAge: 30 * 24 * 3600,
	})
	return true
}

// authorized reports whether r carries the login cookie or the token.
func (s *Server) authorized(r *http.Request) bool {
	if c, err := r.Cookie(cookieName); err == nil && subtle.ConstantTimeCompare([]byte(c.Value), []byte(s.cookie)) == 1 {
		return true
	}
	if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return subtle.ConstantTimeCompare([]byte(bearer), []byte(s.token)) == 1
	}
	return false
}

func (s *Server) auth(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			httpjson.Write(w, http.StatusUnauthorized, map[string]string{"error": "not logged in: open the login link the gateway printed"})
			return
		}
		h(w, r)
	})
}

// conversation is one entry of the conversation list.
type conversation struct {
	ID      string    `json:"id"`
	Title   string    `json:"title"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

func (s *Server) listConversations(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	keys, err := s.convs.ListKeys(ctx)
	if err != nil {
		s.fail(w, err)
		return
	}
	list := []conversation{}
	for k := range keys.Keys() {
		if c, err := s.conversation(ctx, k); err == nil {
			list = append(list, c)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Updated.After(list[j].Updated) })
	httpjson.Write(w, http.StatusOK, list)
}

func (s *Server) conversation(ctx context.Context, id string) (conversation, error) {
	e, err := bus.Get(ctx, s.convs, id)
	if err != nil {
		return conversation{}, err
	}
	var c conversation
	err = json.Unmarshal(e.Value(), &c)
	return c, err
}

func (s *Server) createConversation(w http.ResponseWriter, r *http.Request) {
	now := time.Now().UTC()
	c := conversation{ID: strings.ToLower(rand.Text()[:12]), Title: "New chat", Created: now, Updated: now}
	data, _ := json.Marshal(c)
	if _, err := s.convs.Create(r.Context(), c.ID, data); err != nil {
		s.fail(w, err)
		return
	}
	httpjson.Write(w, http.StatusCreated, c)
}

// touch updates a conversation's time, and its title from the first
// message.
func (s *Server) touch(ctx context.Context, id, text string) {
	for range 3 {
		e, err := bus.Get(ctx, s.convs, id)
		var c conversation
		if err == nil {
			_ = json.Unmarshal(e.Value(), &c)
		} else {
			c = conversation{ID: id, Title: "New chat", Created: time.Now().UTC()}
		}
		if c.Title == "New chat" && strings.TrimSpace(text) != "" {
			c.Title = title(text)
		}
		c.Updated = time.Now().UTC()
		data, _ := json.Marshal(c)
		if err == nil {
			_, err = s.convs.Update(ctx, id, data, e.Revision())
		} else {
			_, err = s.convs.Create(ctx, id, data)
		}
		if err == nil || !errors.Is(err, jetstream.ErrKeyExists) {
			return
		}
	}
}

// title is a conversation's title: its first message on one line, at
// most 60 characters with the ellipsis.
func title(text string) string { return textcut.Line(text, 59) }

// validID accepts the conversation ids the server hands out.
func validID(id string) bool {
	if len(id) == 0 || len(id) > 40 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func (s *Server) fail(w http.ResponseWriter, err error) {
	s.log.Error("web chat request failed", "err", err)
	httpjson.Write(w, http.StatusInternalServerError, map[string]string{"error": "internal error"})
}
