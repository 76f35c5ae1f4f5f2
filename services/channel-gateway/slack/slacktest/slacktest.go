// Package slacktest is a fake Slack for tests: the Web API methods the
// adapter uses (apps.connections.open, auth.test, chat.postMessage,
// chat.update, chat.delete, reactions.add, and the upload of a file:
// files.getUploadURLExternal, the POST of its bytes to the upload URL it
// hands out, files.completeUploadExternal) at /api/<method>, form-encoded
// as Slack takes them, and a Socket Mode WebSocket at the URL
// apps.connections.open hands out, which says hello, pings, sends Events
// API envelopes and records the acknowledgements. Scripted failures
// include 429 with a Retry-After header. A message or update whose text is
// over [MaxText] characters is refused with msg_too_long.
package slacktest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/fakeplatform"
)

// MaxText is the longest message text Slack takes, in characters
// (https://api.slack.com/methods/chat.postMessage: "no more than 40,000
// characters"); longer text is answered with msg_too_long.
const MaxText = 40000

// BotUserID is the bot's user id that auth.test reports.
const BotUserID = "UBOT"

// Call is one Web API request.
type Call struct {
	Method string
	Fields map[string]string
	// Token is the bearer token the request carried.
	Token string
	// At is when the server received the call.
	At time.Time
	// TS is the message posted or updated, when the call succeeded.
	TS string
	// Files are the files a files.completeUploadExternal shared, or the
	// one whose bytes an [Upload] received, when the call succeeded.
	Files []File
}

// Failure is a scripted error: an HTTP status with Retry-After, or a
// Slack error code in an ok:false body.
type Failure struct {
	Status     int
	RetryAfter int
	Error      string
}

// Server is a fake Slack. Tests read the Web API calls it received by
// method (Calls, Next, None), script failures per method (Fail, Pass),
// and wait for Socket Mode connections (WaitConnected, WaitConnections,
// Connections).
type Server struct {
	URL string
	// APIURL is what slack.OptionAPIURL takes.
	APIURL string

	*fakeplatform.Recorder[Call]
	fakeplatform.Script[Failure]
	fakeplatform.Link

	files fakeplatform.Files             // downloadable
	acks  *fakeplatform.Recorder[string] // envelope ids acknowledged

	mu        sync.Mutex
	ts        int
	envelopes int
	texts     map[string]string // message ts -> text, as updated
	fileIDs   int
	uploads   map[string]*File // file id -> file, from files.getUploadURLExternal on
}

// New starts a fake, stopped at the end of the test.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{Recorder: fakeplatform.NewRecorder("slacktest calls", func(c Call) string { return c.Method }), acks: fakeplatform.NewRecorder("slacktest acks", func(id string) string { return id }), texts: map[string]string{}, uploads: map[string]*File{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/{method}", s.serveAPI)
	mux.HandleFunc("/link", s.serveSocket)
	mux.HandleFunc("GET /files/{name}", s.serveFile)
	mux.HandleFunc("POST /upload/v1/{id}", s.serveUpload)
	s.URL = fakeplatform.Serve(t, mux, &s.Link)
	s.APIURL = s.URL + "/api/"
	return s
}

// AddFile makes a file downloadable at the URL returned, for the bot token
// only, as Slack's url_private_download is.
func (s *Server) AddFile(name string, data []byte) string {
	s.files.Add(name, data)
	return s.URL + "/files/" + name
}

func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer xoxb-") {
		http.Error(w, "not authed", http.StatusForbidden)
		return
	}
	s.files.Serve(w, r, r.PathValue("name"))
}

// Send sends an Events API envelope carrying event (the inner event
// object) with eventID, and returns the envelope id.
func (s *Server) Send(t testing.TB, eventID string, event map[string]any) string {
	t.Helper()
	s.mu.Lock()
	s.envelopes++
	env := fmt.Sprintf("env-%d", s.envelopes)
	s.mu.Unlock()
	payload := map[string]any{
		"token": "verif", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
		"event_id": eventID, "event_time": time.Now().Unix(), "event": event,
	}
	data, _ := json.Marshal(map[string]any{
		"envelope_id": env, "type": "events_api", "accepts_response_payload": false, "payload": payload,
	})
	s.Raw(t, string(data))
	return env
}

// Raw sends a raw frame on the Socket Mode connection.
func (s *Server) Raw(t testing.TB, frame string) {
	t.Helper()
	s.Link.Write(t, websocket.MessageText, []byte(frame))
}

// WaitAck waits until envelope was acknowledged.
func (s *Server) WaitAck(t testing.TB, envelope string, timeout time.Duration) {
	t.Helper()
	s.acks.Next(t, timeout, envelope)
}

// Message is an inner message event.
func Message(user, channel, channelType, ts, text string) map[string]any {
	return map[string]any{
		"type": "message", "user": user, "channel": channel, "channel_type": channelType,
		"ts": ts, "event_ts": ts, "text": text,
	}
}

// AppMention is an inner app_mention event.
func AppMention(user, channel, ts, text string) map[string]any {
	return map[string]any{"type": "app_mention", "user": user, "channel": channel, "ts": ts, "event_ts": ts, "text": text}
}

// Text is a posted message's current text, after updates.
func (s *Server) Text(ts string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.texts[ts]
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	method := r.PathValue("method")
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c := Call{Method: method, Fields: map[string]string{}, Token: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), At: time.Now()}
	for k, v := range r.Form {
		c.Fields[k] = v[0]
	}
	if c.Token == "" {
		c.Token = c.Fields["token"]
	}
	s.mu.Lock()
	f := s.Script.Take(method)
	ts, known := c.Fields["ts"], false
	var files map[string]any // the answer of a files method
	tooLong := (method == "chat.postMessage" || method == "chat.update") && utf8.RuneCountInString(c.Fields["text"]) > MaxText
	switch {
	case f != nil:
	case tooLong:
	case method == "chat.postMessage":
		s.ts++
		ts = fmt.Sprintf("1700000000.%06d", s.ts)
		c.TS = ts
		s.texts[ts] = c.Fields["text"]
	case method == "chat.update":
		if _, known = s.texts[ts]; known {
			c.TS = ts
			s.texts[ts] = c.Fields["text"]
		}
	case method == "chat.delete":
		_, known = s.texts[ts]
		delete(s.texts, ts)
	case method == "files.getUploadURLExternal":
		files = s.reserve(c.Fields)
	case method == "files.completeUploadExternal":
		files, c.Files = s.share(c.Fields)
	}
	s.mu.Unlock()
	s.Recorder.Add(c)
	if f != nil {
		writeFailure(w, f)
		return
	}
	if tooLong {
		writeJSON(w, map[string]any{"ok": false, "error": "msg_too_long"})
		return
	}
	switch method {
	case "apps.connections.open":
		if !strings.HasPrefix(c.Token, "xapp-") {
			writeJSON(w, map[string]any{"ok": false, "error": "not_allowed_token_type"})
			return
		}
		writeJSON(w, map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(s.URL, "http") + "/link?ticket=t1"})
	case "auth.test":
		if !strings.HasPrefix(c.Token, "xoxb-") {
			writeJSON(w, map[string]any{"ok": false, "error": "invalid_auth"})
			return
		}
		writeJSON(w, map[string]any{"ok": true, "url": "https://fake.slack.com/", "team": "Fake", "user": "nano", "team_id": "T1", "user_id": BotUserID, "bot_id": "B1"})
	case "chat.postMessage":
		writeJSON(w, map[string]any{"ok": true, "channel": c.Fields["channel"], "ts": ts, "message": map[string]any{"text": c.Fields["text"], "ts": ts}})
	case "chat.update":
		if !known {
			writeJSON(w, map[string]any{"ok": false, "error": "message_not_found"})
			return
		}
		writeJSON(w, map[string]any{"ok": true, "channel": c.Fields["channel"], "ts": ts, "text": c.Fields["text"]})
	case "chat.delete":
		if !known {
			writeJSON(w, map[string]any{"ok": false, "error": "message_not_found"})
			return
		}
		writeJSON(w, map[string]any{"ok": true, "channel": c.Fields["channel"], "ts": ts})
	case "reactions.add":
		writeJSON(w, map[string]any{"ok": true})
	case "files.getUploadURLExternal", "files.completeUploadExternal":
		writeJSON(w, files)
	default:
		writeJSON(w, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

func (s *Server) serveSocket(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	ctx := r.Context()
	hello, _ := json.Marshal(map[string]any{
		"type": "hello", "num_connections": 1,
		"debug_info":      map[string]any{"host": "fake", "approximate_connection_time": 3600},
		"connection_info": map[string]any{"app_id": "A1"},
	})
	if err := c.Write(ctx, websocket.MessageText, hello); err != nil {
		return
	}
	defer s.Link.Open(c)()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // Slack pings; the client reconnects without them
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
				_ = c.Ping(pctx)
				pcancel()
			}
		}
	}()
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		var ack struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if json.Unmarshal(data, &ack) == nil && ack.EnvelopeID != "" {
			s.acks.Add(ack.EnvelopeID)
		}
	}
}

// writeFailure answers as f scripts: an HTTP status (with Retry-After),
// or Slack's ok:false with an error code.
func writeFailure(w http.ResponseWriter, f *Failure) {
	if f.Status != 0 {
		if f.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
		}
		w.WriteHeader(f.Status)
		_, _ = w.Write([]byte(`{"ok":false,"error":"ratelimited"}`))
		return
	}
	writeJSON(w, map[string]any{"ok": false, "error": f.Error})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
