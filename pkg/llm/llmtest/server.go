package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	fastjson "github.com/segmentio/encoding/json"
)

// Option configures a Server.
type Option func(*settings)

type settings struct {
	latency     time.Duration
	failures    int64
	failStatus  int
	maxRecorded int // negative: unbounded
	models      []string
	apiKey      string
	light       bool
}

// WithLatency delays every reply by d, unless the Reply sets its own
// Latency. Waits end early when the client goes away or the server closes.
func WithLatency(d time.Duration) Option {
	return func(s *settings) { s.latency = d }
}

// WithFailures makes the first n chat requests fail with status: 429 comes
// with "Retry-After: 0", other statuses without the header. Injected
// failures do not consume queued replies.
func WithFailures(n, status int) Option {
	return func(s *settings) { s.failures, s.failStatus = int64(n), status }
}

// WithMaxRecorded keeps only the n most recent requests for Requests (zero
// keeps none); RequestCount still counts them all. The default keeps all.
func WithMaxRecorded(n int) Option {
	return func(s *settings) { s.maxRecorded = max(n, 0) }
}

// WithModels sets the ids listed by GET /v1/models (default "llmtest").
func WithModels(ids ...string) Option {
	return func(s *settings) { s.models = slices.Clone(ids) }
}

// WithAPIKey makes the server answer 401 unless the request carries
// "Authorization: Bearer <key>".
func WithAPIKey(key string) Option {
	return func(s *settings) { s.apiKey = key }
}

// WithLightRequests makes the server read of each request only the model,
// the stream settings, the tools' type, name and description (no schema)
// and the last message (Messages holds only that one). A load generator
// sets it so that the fake model, which shares the machine with the fleet
// under test, does not spend on decoding every request's system prompt
// and schemas what a remote model's machine would.
func WithLightRequests() Option {
	return func(s *settings) { s.light = true }
}

// Server is a fake OpenAI-compatible endpoint. Its methods are safe for
// concurrent use.
type Server struct {
	ts   *httptest.Server
	set  settings
	done chan struct{}
	seq  atomic.Int64

	mu       sync.Mutex
	queue    []Reply
	script   Script
	recorded []RecordedRequest
}

// NewServer starts a server on 127.0.0.1, closed when the test ends.
func NewServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	set := settings{maxRecorded: -1, models: []string{"llmtest"}}
	for _, o := range opts {
		o(&set)
	}
	s := &Server{set: set, done: make(chan struct{}), script: Echo}
	s.ts = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	t.Cleanup(s.Close)
	return s
}

// URL returns the base URL, ending in /v1 (what Config.APIBase wants).
func (s *Server) URL() string { return s.ts.URL + "/v1" }

// Close stops the server; pending latency waits end at once. NewServer
// arranges for it to be called when the test ends.
func (s *Server) Close() {
	select {
	case <-s.done:
		return
	default:
		close(s.done)
	}
	s.ts.Close()
}

// Enqueue appends replies to the queue; each chat request takes the next
// one. Once the queue is empty the Script answers.
func (s *Server) Enqueue(replies ...Reply) {
	s.mu.Lock()
	s.queue = append(s.queue, replies...)
	s.mu.Unlock()
}

// Pending returns how many queued replies are left.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Handle sets the Script answering requests when the queue is empty; nil
// restores Echo.
func (s *Server) Handle(script Script) {
	if script == nil {
		script = Echo
	}
	s.mu.Lock()
	s.script = script
	s.mu.Unlock()
}

// RequestCount returns how many chat requests arrived (failed ones too).
func (s *Server) RequestCount() int { return int(s.seq.Load()) }

// Requests returns the recorded chat requests in arrival order (only the
// most recent ones under WithMaxRecorded).
func (s *Server) Requests() []RecordedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.recorded
	if n := s.set.maxRecorded; n >= 0 && len(rec) > n {
		rec = rec[len(rec)-n:]
	}
	return slices.Clone(rec)
}

// LastRequest returns the most recent recorded request.
func (s *Server) LastRequest() (RecordedRequest, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.recorded) == 0 {
		return RecordedRequest{}, false
	}
	return s.recorded[len(s.recorded)-1], true
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case path == "/v1/chat/completions" && r.Method == http.MethodPost:
		s.chat(w, r)
	case path == "/v1/models" && r.Method == http.MethodGet:
		writeModels(w, s.set.models)
	case path == "/v1/chat/completions" || path == "/v1/models":
		writeError(w, &Reply{Status: http.StatusMethodNotAllowed, Message: "llmtest: method not allowed"})
	default:
		writeError(w, &Reply{Status: http.StatusNotFound, Message: "llmtest: unknown path " + r.URL.Path})
	}
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	seq := s.seq.Add(1)
	rec := RecordedRequest{Seq: seq, Header: r.Header.Clone()}
	if err := s.decode(r, &rec.ChatCompletionRequest); err != nil {
		writeError(w, &Reply{Status: http.StatusBadRequest, Message: "llmtest: bad request body: " + err.Error()})
		return
	}
	var reply Reply
	switch {
	case s.set.apiKey != "" && r.Header.Get("Authorization") != "Bearer "+s.set.apiKey:
		s.record(rec)
		reply = Reply{Status: http.StatusUnauthorized, Message: "llmtest: invalid api key"}
	case seq <= s.set.failures:
		s.record(rec)
		reply = Fail(s.set.failStatus, "")
		if s.set.failStatus == http.StatusTooManyRequests {
			reply.RetryAfter = "0"
		}
	default:
		var script Script
		if reply, script = s.next(rec); script != nil {
			reply = script(&rec)
		}
	}
	latency := reply.Latency
	if latency == 0 {
		latency = s.set.latency
	}
	if !s.wait(r, latency) {
		return
	}
	if reply.failed() {
		writeError(w, &reply)
		return
	}
	if rec.Stream {
		s.writeStream(w, r, &rec, &reply)
		return
	}
	writeCompletion(w, &rec, &reply)
}

// decode reads the request body into req, only in part under
// WithLightRequests.
func (s *Server) decode(r *http.Request, req *openai.ChatCompletionRequest) error {
	if !s.set.light {
		return json.NewDecoder(r.Body).Decode(req)
	}
	buf := bodyBuffers.Get().(*bytes.Buffer)
	defer bodyBuffers.Put(buf)
	buf.Reset()
	if _, err := buf.ReadFrom(r.Body); err != nil {
		return err
	}
	return decodeLight(buf.Bytes(), req)
}

// bodyBuffers hold request bodies under WithLightRequests: one per
// request in flight, reused.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// lightRequest is what WithLightRequests reads of a request: every field
// but the messages and tools as they are, the messages undecoded (only
// the last is), the tools without their schemas.
type lightRequest struct {
	openai.ChatCompletionRequest
	Messages []fastjson.RawMessage `json:"messages"`
	Tools    []struct {
		Type     openai.ToolType `json:"type"`
		Function *struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"function"`
	} `json:"tools"`
}

// decodeLight decodes body into req without the messages before the last
// one and without the tools' schemas. encoding/json scans every byte of
// a value it skips twice, which for the fleet's requests (the system
// prompt and a dozen schemas, tens of KB) cost the fake model more CPU
// than the turn it served spent on its bus work; segmentio's decoder
// (the MCP SDK's JSON) validates and skips them several times faster.
// It copies what it keeps: body goes back to a pool.
func decodeLight(body []byte, req *openai.ChatCompletionRequest) error {
	var l lightRequest
	if err := fastjson.Unmarshal(body, &l); err != nil {
		return err
	}
	*req = l.ChatCompletionRequest
	if n := len(l.Messages); n > 0 {
		var m openai.ChatCompletionMessage
		if err := fastjson.Unmarshal(l.Messages[n-1], &m); err != nil {
			return fmt.Errorf("last message: %w", err)
		}
		req.Messages = []openai.ChatCompletionMessage{m}
	}
	for _, t := range l.Tools {
		tool := openai.Tool{Type: t.Type}
		if t.Function != nil {
			tool.Function = &openai.FunctionDefinition{Name: t.Function.Name, Description: t.Function.Description}
		}
		req.Tools = append(req.Tools, tool)
	}
	return nil
}

// record keeps rec for Requests.
func (s *Server) record(rec RecordedRequest) {
	s.mu.Lock()
	s.recordLocked(rec)
	s.mu.Unlock()
}

func (s *Server) recordLocked(rec RecordedRequest) {
	n := s.set.maxRecorded
	if n == 0 {
		return
	}
	s.recorded = append(s.recorded, rec)
	if n > 0 && len(s.recorded) >= 2*n {
		s.recorded = append(s.recorded[:0], s.recorded[len(s.recorded)-n:]...)
	}
}

// next records rec and pops the next queued reply, or returns the Script
// to call when the queue is empty.
func (s *Server) next(rec RecordedRequest) (Reply, Script) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recordLocked(rec)
	if len(s.queue) > 0 {
		reply := s.queue[0]
		s.queue[0] = Reply{}
		s.queue = s.queue[1:]
		return reply, nil
	}
	return Reply{}, s.script
}

// wait sleeps d; false means the client or the server went away.
func (s *Server) wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-s.done:
		return false
	}
}
