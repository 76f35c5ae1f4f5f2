package dashboard

import (
	"embed"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"rsc.io/qr"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/httpjson"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/webpage"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

//go:embed static
var static embed.FS

// Gate decides who may see the dashboard. The web chat's server is one, so
// the dashboard shares its login.
type Gate interface {
	// Authorized reports whether r carries the login.
	Authorized(r *http.Request) bool
	// LogIn checks a login link's token and, when it is right, sets the
	// login cookie on w.
	LogIn(w http.ResponseWriter, r *http.Request, token string) bool
}

// Deps are what the dashboard needs from its surroundings.
type Deps struct {
	// Bus is the fleet's connection.
	Bus *bus.Bus
	// Gate checks the login.
	Gate Gate
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Server is the dashboard's HTTP handler, to be mounted at /dashboard and
// /dashboard/.
type Server struct {
	cfg   Config
	deps  Deps
	log   *slog.Logger
	snaps *snapshotter
	mux   *http.ServeMux
}

// Option changes an optional setting of [New].
type Option func(*Server)

// WithLogger sets the dashboard's logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = observe.OrDiscard(l) } }

// New returns the dashboard.
func New(cfg Config, deps Deps, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Bus == nil || deps.Gate == nil {
		return nil, errors.New("dashboard: Deps.Bus and Deps.Gate are required")
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, deps: deps, log: slog.New(slog.DiscardHandler), snaps: newSnapshotter(cfg, deps.Bus, deps.Now)}
	for _, o := range opts {
		o(s)
	}
	files, _ := fs.Sub(static, "static")
	mux := http.NewServeMux()
	index := webpage.Index{Files: files, Gate: deps.Gate, Home: "/dashboard",
		CSP: "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'"}
	mux.Handle("GET /dashboard", index)
	mux.Handle("GET /dashboard/{$}", index)
	mux.Handle("GET /dashboard/static/", http.StripPrefix("/dashboard/static/", http.FileServerFS(files)))
	mux.Handle("GET /dashboard/api/snapshot", s.auth(s.snapshot))
	mux.Handle("GET /dashboard/api/live", s.auth(s.live))
	mux.Handle("GET /dashboard/api/qr/{channel}", s.auth(s.qr))
	s.mux = mux
	return s, nil
}

// qr serves the QR code a channel waits to have scanned (WhatsApp's
// link) as a PNG; 404 when it waits for none.
func (s *Server) qr(w http.ResponseWriter, r *http.Request) {
	board, err := status.Open(r.Context(), s.deps.Bus)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	rec, err := board.Linking(r.Context(), r.PathValue("channel"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if rec == nil {
		http.Error(w, "no QR code to scan", http.StatusNotFound)
		return
	}
	code, err := qr.Encode(rec.QR, qr.L)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(code.PNG())
}

// ServeHTTP serves the page and its API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) auth(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.deps.Gate.Authorized(r) {
			httpjson.Write(w, http.StatusUnauthorized, map[string]string{"error": "not logged in: open the login link the gateway printed"})
			return
		}
		h(w, r)
	})
}

func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) {
	_, data, err := s.snaps.get(r.Context(), s.deps.Now().Add(-s.cfg.Interval/2))
	if err != nil {
		s.log.Debug("dashboard snapshot", "err", err)
		httpjson.Write(w, http.StatusServiceUnavailable, map[string]string{"error": "no snapshot: " + err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(data)
}
