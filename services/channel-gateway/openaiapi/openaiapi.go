package openaiapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/observe"
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
		token: cfg.Token, model: cfg.Model, timeout: time.Duration(cfg.TimeoutSeconds) * time.Second,
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

// maxBodyBytes bounds a request body: a message at the gateway's limit,
// JSON-escaped, with the client's copy of the conversation around it.
const maxBodyBytes = 4 << 20

// bodyError says what is wrong with a request body in the API's terms:
// decoding errors name Go types ("Go struct field chatRequest.messages of
// type []struct {…}"), which mean nothing to a client.
func bodyError(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		want := "a " + typeErr.Type.Kind().String()
		switch typeErr.Type.Kind() {
		case reflect.Slice, reflect.Array:
			want = "an array"
		case reflect.Struct, reflect.Map:
			want = "an object"
		case reflect.Int, reflect.Int64, reflect.Float64:
			want = "a number"
		case reflect.Interface:
			want = "a value"
		}
		field := typeErr.Field
		if field == "" {
			field = "the body"
		}
		return fmt.Sprintf("Invalid type for '%s': expected %s, but got %s.", field, want, typeErr.Value)
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("The request body is not valid JSON (at byte %d): %v.", syntaxErr.Offset, syntaxErr)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "The request body is empty or cut short; send a JSON object."
	}
	return "The request body is not valid JSON: " + err.Error()
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
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err == nil {
		err = json.NewDecoder(bytes.NewReader(raw)).Decode(&req)
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			apiError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large",
				fmt.Sprintf("The request body is larger than %d MiB.", maxBodyBytes>>20))
			return
		}
		apiError(w, http.StatusBadRequest, "invalid_request_error", "", bodyError(err))
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
	if len(text) > gateway.MaxContentBytes {
		// Refused before watching the chat; a smaller limit from the
		// model's context window comes back from Publish.
		tooLarge(w, &gateway.TooLargeError{Size: len(text), Limit: gateway.MaxContentBytes})
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
	id := newID()
	var since time.Time
	// sdkAttempt is the attempt number an OpenAI SDK (Stainless) sends
	// with every request; -1 from other clients.
	sdkAttempt := -1
	if n, err := strconv.Atoi(r.Header.Get("X-Stainless-Retry-Count")); err == nil && n >= 0 {
		sdkAttempt = n
	}
	switch key := r.Header.Get("Idempotency-Key"); {
	case key != "":
		id = keyedID(chat, "key", []byte(key))
	case sdkAttempt >= 0:
		// The SDKs retry without a key, with the same body: the body is
		// the key. Attempt 0 is never taken for a retry (see below).
		id = keyedID(chat, "body", raw)
	}
	if strings.HasPrefix(id, keyedPrefix) {
		// A retry's publish is dropped as a duplicate within the inbound
		// stream's window, so its answer may already be out: read the
		// chat's replies from the start of that window.
		since = time.Now().Add(-s.duplicateWindow(r.Context()))
	}

	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	wch, err := watch.New(ctx, s.deps.Bus, Channel, chat, watch.WithSince(since), watch.WithLogger(s.log))
	if err != nil {
		s.log.Error("api watch", "err", err)
		apiError(w, http.StatusServiceUnavailable, "server_error", "", "The fleet is not reachable.")
		return
	}
	// It ends with ctx (cancelled when this handler returns), deleting its
	// consumer after the response is out.
	go func() { _ = wch.Run(ctx) }()
	in := &nanofleetv1.InboundMessage{
		Id: id, Channel: Channel, ChatId: chat, SenderId: "api", SenderName: req.User, Content: text,
		Metadata: map[string]string{"model": req.Model},
	}
	if req.Stream {
		in.Metadata["stream"] = "true" // asks the worker for deltas
	}
	dup, err := s.publish(ctx, in)
	if err == nil && dup && sdkAttempt == 0 && r.Header.Get("Idempotency-Key") == "" {
		// An SDK's first attempt whose body is already stored is the
		// same question asked again, not a retry: a turn of its own.
		in.Id = newID()
		id = in.Id
		_, err = s.publish(ctx, in)
	}
	if err != nil {
		s.log.Error("api message not published", "err", err)
		switch {
		case errors.Is(err, gateway.ErrStorageFull):
			storageFull(w)
		case errors.Is(err, gateway.ErrTooLarge):
			tooLarge(w, err)
		default:
			apiError(w, http.StatusServiceUnavailable, "server_error", "", "The fleet is not reachable.")
		}
		return
	}
	t := turn{s: s, w: w, id: "chatcmpl-" + strings.TrimPrefix(id, "api-"), created: time.Now().Unix(), stream: req.Stream, replay: !since.IsZero(),
		includeUsage: req.Stream && req.StreamOptions.IncludeUsage}
	t.run(ctx, wch, id)
}

// keyedPrefix starts the ids of requests that may repeat an earlier one.
const keyedPrefix = "api-k"

func newID() string { return "api-" + strings.ToLower(rand.Text()[:20]) }

// keyedID is the inbound id of a request identified by key in chat.
func keyedID(chat, kind string, key []byte) string {
	h := sha256.New()
	h.Write([]byte(chat + "\x00" + kind + "\x00"))
	h.Write(key)
	return keyedPrefix + hex.EncodeToString(h.Sum(nil)[:12])
}

// publish stores in, reporting whether it repeats a stored message.
func (s *Server) publish(ctx context.Context, in *nanofleetv1.InboundMessage) (duplicate bool, err error) {
	if st, ok := s.deps.Inbox.(interface {
		Store(context.Context, *nanofleetv1.InboundMessage) (bool, error)
	}); ok {
		return st.Store(ctx, in)
	}
	return false, s.deps.Inbox.Publish(ctx, in)
}

// storageFull answers 507 for a message the fleet has no room for.
func storageFull(w http.ResponseWriter) {
	apiError(w, http.StatusInsufficientStorage, "server_error", "storage_full",
		"Storage full: the fleet has no room to store the message, so it was not received. Try again once space is freed.")
}

// tooLarge answers 413 for a message the fleet refused for its size.
func tooLarge(w http.ResponseWriter, err error) {
	msg := "The message is too large for the fleet to store."
	var tl *gateway.TooLargeError
	if errors.As(err, &tl) {
		msg = fmt.Sprintf("The last user message has %d bytes of text; the fleet accepts at most %d (the model's context window or its storage).", tl.Size, tl.Limit)
	}
	apiError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large", msg)
}

// duplicateWindow is the inbound stream's duplicate window, within which
// a request with the same Idempotency-Key is the same message. It is read
// once: provisioning sets it at start-up.
func (s *Server) duplicateWindow(ctx context.Context) time.Duration {
	if d := s.dupWindow.Load(); d > 0 {
		return time.Duration(d)
	}
	ctx, cancel := context.WithTimeout(ctx, bus.CallTimeout)
	defer cancel()
	st, err := s.deps.Bus.JS.Stream(ctx, s.deps.Bus.Space.InboundStream())
	if err != nil || st.CachedInfo().Config.Duplicates <= 0 {
		return 10 * time.Minute // the layout's default
	}
	s.dupWindow.Store(int64(st.CachedInfo().Config.Duplicates))
	return st.CachedInfo().Config.Duplicates
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
