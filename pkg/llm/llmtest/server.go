package llmtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	openai "github.com/sashabaranov/go-openai"
	"github.com/tidwall/gjson"
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

// decodeLight decodes body into req without the messages before the last
// one and without the tools' schemas. encoding/json cannot skip a value
// without running its scanner over every byte twice, which for the
// fleet's 12 KB requests cost the fake model more CPU than the turn it
// served spent on its bus work; gjson finds where a value ends at memory
// speed, and encoding/json decodes only what is kept.
func decodeLight(body []byte, req *openai.ChatCompletionRequest) error {
	if !gjson.ValidBytes(body) {
		return errors.New("invalid JSON")
	}
	// The body's own bytes, not a copy: every string kept below is cloned
	// or decoded by encoding/json before the buffer goes back to the pool.
	root := gjson.Parse(unsafe.String(unsafe.SliceData(body), len(body)))
	if !root.IsObject() {
		return errors.New("request body is not a JSON object")
	}
	// Every other field is decoded by encoding/json, from an object of
	// just those fields.
	rest := []byte{'{'}
	var err error
	root.ForEach(func(key, value gjson.Result) bool {
		switch key.Str {
		case "messages":
			var last gjson.Result
			value.ForEach(func(_, m gjson.Result) bool { last = m; return true })
			if last.Exists() {
				var m openai.ChatCompletionMessage
				if err = json.Unmarshal([]byte(last.Raw), &m); err != nil {
					err = fmt.Errorf("last message: %w", err)
					return false
				}
				req.Messages = []openai.ChatCompletionMessage{m}
			}
		case "tools":
			value.ForEach(func(_, t gjson.Result) bool {
				tool := openai.Tool{Type: openai.ToolType(strings.Clone(t.Get("type").Str))}
				if f := t.Get("function"); f.IsObject() {
					tool.Function = &openai.FunctionDefinition{Name: strings.Clone(f.Get("name").Str), Description: strings.Clone(f.Get("description").Str)}
				}
				req.Tools = append(req.Tools, tool)
				return true
			})
		default:
			if len(rest) > 1 {
				rest = append(rest, ',')
			}
			rest = append(rest, key.Raw...)
			rest = append(rest, ':')
			rest = append(rest, value.Raw...)
		}
		return true
	})
	if err != nil {
		return err
	}
	return json.Unmarshal(append(rest, '}'), req)
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
