package openaiapi

import (
	"crypto/rand"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/httpjson"
)

// Channel is the channel name of API sessions.
const Channel = "api"

// Deps are what the API needs from its surroundings.
type Deps struct {
	Bus *bus.Bus
	// Inbox publishes the requests' messages.
	Inbox gateway.Inbox
	// Storage, when set, says whether the fleet's store has room. A
	// request waiting for its answer when the store fills is answered
	// 507 then: its turn cannot commit until space is freed.
	Storage func() error
}

// Server serves the OpenAI-compatible API.
type Server struct {
	cfg     Config
	deps    Deps
	log     *slog.Logger
	token   string
	model   string
	timeout time.Duration
	created int64
	mux     *http.ServeMux
	// dupWindow caches duplicateWindow (nanoseconds; 0 until read).
	dupWindow atomic.Int64
}

// Option changes an optional setting of [New].
type Option func(*Server)

// WithLogger sets the API's logger; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(s *Server) { s.log = observe.OrDiscard(l).With("channel", Channel) }
}

// New returns the API for cfg.
func New(cfg Config, deps Deps, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, deps: deps, log: slog.New(slog.DiscardHandler),
		token: cfg.Token, model: cfg.Model, timeout: config.SecondsDuration(cfg.TimeoutSeconds),
		created: time.Now().Unix(),
	}
	for _, o := range opts {
		o(s)
	}
	if s.token == "" {
		s.token = "nf-" + rand.Text()
	}
	if s.model == "" {
		s.model = "nanofleet"
	}
	if s.timeout == 0 {
		s.timeout = 10 * time.Minute
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/chat/completions", s.auth(s.chatCompletions))
	mux.Handle("GET /v1/models", s.auth(s.models))
	mux.Handle("GET /v1/models/{id}", s.auth(s.modelInfo))
	// Without these the mux answers a wrong method or path in plain text,
	// which OpenAI clients cannot parse.
	mux.HandleFunc("/v1/chat/completions", methodNotAllowed("POST"))
	mux.HandleFunc("/v1/models", methodNotAllowed("GET"))
	mux.HandleFunc("/v1/models/{id}", methodNotAllowed("GET"))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path))
	})
	s.mux = mux
	return s, nil
}

// Token is the API key clients must send (configured or generated).
func (s *Server) Token() string { return s.token }

// ServeHTTP serves the /v1 routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) auth(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(key), []byte(s.token)) != 1 {
			apiError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
			return
		}
		h(w, r)
	})
}

func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		apiError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed",
			fmt.Sprintf("%s is not allowed on %s; use %s.", r.Method, r.URL.Path, allow))
	}
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	httpjson.Write(w, http.StatusOK, map[string]any{"object": "list", "data": []any{s.modelObject()}})
}

func (s *Server) modelInfo(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("id") != s.model {
		apiError(w, http.StatusNotFound, "invalid_request_error", "model_not_found", fmt.Sprintf("The model '%s' does not exist.", r.PathValue("id")))
		return
	}
	httpjson.Write(w, http.StatusOK, s.modelObject())
}

func (s *Server) modelObject() map[string]any {
	return map[string]any{"id": s.model, "object": "model", "created": s.created, "owned_by": "nanofleet"}
}
