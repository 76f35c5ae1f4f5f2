package openaiapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/watch"
)

// Channel is the channel name of API sessions.
const Channel = "api"

// Deps are what the API needs from its surroundings.
type Deps struct {
	Bus *bus.Bus
	// Inbox publishes the requests' messages.
	Inbox gateway.Inbox
	Log   *slog.Logger
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
}

// New returns the API for cfg.
func New(cfg Config, deps Deps) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, deps: deps, log: deps.Log.With("channel", Channel),
		token: cfg.Token, model: cfg.Model, timeout: time.Duration(cfg.TimeoutSeconds) * time.Second,
		created: time.Now().Unix(),
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

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{s.modelObject()}})
}

func (s *Server) modelInfo(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("id") != s.model {
		apiError(w, http.StatusNotFound, "invalid_request_error", "model_not_found", fmt.Sprintf("The model '%s' does not exist.", r.PathValue("id")))
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject())
}

func (s *Server) modelObject() map[string]any {
	return map[string]any{"id": s.model, "object": "model", "created": s.created, "owned_by": "nanofleet"}
}

// chatRequest is the part of a chat completion request the fleet uses.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream        bool `json:"stream"`
	StreamOptions struct {
		// IncludeUsage asks for a last chunk with the turn's usage.
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	User string `json:"user"`
}

// errBadRequest marks a request the client must fix.
var errBadRequest = errors.New("bad request")

// lastUserText returns the text of the request's last user message, whose
// content is a string or an array of parts.
func (r *chatRequest) lastUserText() (string, error) {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		m := r.Messages[i]
		if m.Role != "user" {
			continue
		}
		var text string
		if err := json.Unmarshal(m.Content, &text); err == nil {
			return text, nil
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(m.Content, &parts); err != nil {
			return "", fmt.Errorf("%w: messages[%d].content must be a string or an array of parts", errBadRequest, i)
		}
		var b []string
		for _, p := range parts {
			if p.Type == "text" {
				b = append(b, p.Text)
			}
		}
		return strings.Join(b, "\n"), nil
	}
	return "", fmt.Errorf("%w: messages must contain a user message", errBadRequest)
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<20))
	if err := dec.Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "", "The request body is not valid JSON: "+err.Error())
		return
	}
	text, err := req.lastUserText()
	if err == nil && strings.TrimSpace(text) == "" {
		err = fmt.Errorf("%w: the last user message is empty", errBadRequest)
	}
	if err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "", err.Error())
		return
	}
	chat := r.Header.Get("X-Session-Id")
	if chat == "" {
		chat = req.User
	}
	if chat == "" {
		chat = "default"
	}
	if len(chat) > 128 {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "", "The session id is longer than 128 characters.")
		return
	}
	id := "api-" + strings.ToLower(rand.Text()[:20])
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		sum := sha256.Sum256([]byte(chat + "\x00" + key))
		id = "api-" + hex.EncodeToString(sum[:12])
	}

	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	wch, err := watch.Start(ctx, s.deps.Bus, s.log, Channel, chat)
	if err != nil {
		s.log.Error("api watch", "err", err)
		apiError(w, http.StatusServiceUnavailable, "server_error", "", "The fleet is not reachable.")
		return
	}
	defer wch.Stop(context.WithoutCancel(ctx))
	in := &nanofleetv1.InboundMessage{
		Id: id, Channel: Channel, ChatId: chat, SenderId: "api", SenderName: req.User, Content: text,
		Metadata: map[string]string{"model": req.Model},
	}
	if req.Stream {
		in.Metadata["stream"] = "true" // asks the worker for deltas
	}
	if err := s.deps.Inbox.Publish(ctx, in); err != nil {
		s.log.Error("api message not published", "err", err)
		apiError(w, http.StatusServiceUnavailable, "server_error", "", "The fleet is not reachable.")
		return
	}
	t := turn{s: s, w: w, id: "chatcmpl-" + strings.TrimPrefix(id, "api-"), created: time.Now().Unix(), stream: req.Stream,
		includeUsage: req.Stream && req.StreamOptions.IncludeUsage}
	t.run(ctx, wch, id)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// apiError writes an error in OpenAI's shape.
func apiError(w http.ResponseWriter, code int, typ, errCode, msg string) {
	var c any
	if errCode != "" {
		c = errCode
	}
	writeJSON(w, code, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}})
}
