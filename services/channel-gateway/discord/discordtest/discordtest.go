// Package discordtest is a fake Discord for tests. It speaks the real wire
// protocol (https://discord.com/developers/docs): the gateway WebSocket
// with JSON payloads {op, d, s, t} (HELLO, IDENTIFY, READY,
// HEARTBEAT/HEARTBEAT_ACK, DISPATCH, RESUME/RESUMED, INVALID_SESSION) and
// the REST API under /api/v10 (GET /gateway/bot and /users/@me, POST,
// PATCH and DELETE /channels/{id}/messages, POST /channels/{id}/typing),
// answering scripted 429s with Retry-After, X-RateLimit-* headers and a
// retry_after body as Discord does. Attachments are served from /cdn/.
//
// Like Discord, it keeps the events of a session after its connection
// drops, and a RESUME with that session's id and last sequence number
// replays the ones the client missed.
package discordtest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/fakeplatform"
)

// Gateway opcodes.
const (
	OpDispatch       = 0
	OpHeartbeat      = 1
	OpIdentify       = 2
	OpResume         = 6
	OpInvalidSession = 9
	OpHello          = 10
	OpHeartbeatACK   = 11
)

// IntentMessageContent is the privileged intent that fills in content.
const IntentMessageContent = 1 << 15

// Call is one REST request the server received.
type Call struct {
	// Route is the method and path pattern, e.g.
	// "POST /channels/{id}/messages".
	Route string
	// ChannelID and MessageID are the path parameters.
	ChannelID, MessageID string
	// Body is the JSON body (payload_json of a multipart request).
	Body map[string]any
	// Files are uploaded files by name.
	Files map[string][]byte
	// Status is the status the fake answered.
	Status int
	// Duplicate is set when an enforced nonce matched an earlier message,
	// which Discord then returns instead of creating a new one.
	Duplicate bool
	At        time.Time
}

// Content is the body's content field.
func (c Call) Content() string {
	s, _ := c.Body["content"].(string)
	return s
}

// Failure is a scripted error answer.
type Failure struct {
	Status  int
	Code    int
	Message string
	// RetryAfter is the wait asked for by a 429.
	RetryAfter time.Duration
}

// TooManyRequests is Discord's 429 asking to wait d.
func TooManyRequests(d time.Duration) Failure {
	return Failure{Status: http.StatusTooManyRequests, Message: "You are being rate limited.", RetryAfter: d}
}

// Server is a fake Discord.
type Server struct {
	// URL is the REST base (…/api/v10) to configure the adapter with.
	URL string
	// Token is the bot token it accepts.
	Token string
	// BotID and BotName are who the bot is.
	BotID, BotName string
	// BotDiscriminator is the bot's four-digit tag, "0" (the default)
	// for a user migrated to unique usernames. Set before the client
	// connects.
	BotDiscriminator string
	// Disallowed are intents the bot may not use (privileged intents not
	// enabled in the developer portal): an IDENTIFY asking for one is
	// closed with 4014, as Discord does. Set before the client connects.
	Disallowed int

	srv   *httptest.Server
	calls *fakeplatform.Calls[Call]

	mu         sync.Mutex
	conns      map[*conn]bool
	sessions   map[string]*session
	current    *session
	identifies int
	resumes    int
	intents    int
	fail       fakeplatform.Script[Failure]
	files      map[string][]byte
	nextID     int64
	texts      map[string]string // message id -> content, as edited
	nonces     map[string]string // channel + nonce -> message id
	created    []Call
	deleted    []string
}

type session struct {
	id     string
	seq    int
	events []event
	conn   *conn
}

type event struct {
	seq  int
	typ  string
	data json.RawMessage
}

type conn struct {
	ws *websocket.Conn
	mu sync.Mutex
}

func (c *conn) send(v any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ws.WriteJSON(v)
}

// New starts a fake for token, stopped at the end of the test.
func New(t testing.TB, token string) *Server {
	t.Helper()
	s := &Server{
		Token: token, BotID: "900000000000000001", BotName: "nanobot", BotDiscriminator: "0",
		calls: fakeplatform.NewCalls("discordtest", func(c Call) string { return c.Route }), conns: map[*conn]bool{}, sessions: map[string]*session{},
		files: map[string][]byte{}, texts: map[string]string{}, nonces: map[string]string{},
		nextID: 1100000000000000000,
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/api/v10"
	t.Cleanup(func() {
		s.Kill()
		s.srv.Close()
	})
	return s
}

// Calls receives every REST call except the gateway and user look-ups.
func (s *Server) Calls() <-chan Call { return s.calls.Chan() }

// Next waits for the next call of one of routes, skipping others.
func (s *Server) Next(t testing.TB, timeout time.Duration, routes ...string) Call {
	t.Helper()
	return s.calls.Next(t, timeout, routes...)
}

// Fail makes the next calls of route answer as given, in order.
func (s *Server) Fail(route string, f ...Failure) { s.fail.Add(route, f...) }

// Pass lets the next n calls of route through before the failures
// scripted after.
func (s *Server) Pass(route string, n int) { s.fail.Pass(route, n) }

// FailAll makes every call of route fail as f until the test ends.
func (s *Server) FailAll(route string, f Failure) {
	fs := make([]Failure, 10000)
	for i := range fs {
		fs[i] = f
	}
	s.fail.Add(route, fs...)
}

// AddFile serves data at the returned attachment URL.
func (s *Server) AddFile(name string, data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[name] = data
	return s.srv.URL + "/cdn/" + name
}

// Text is a message's current content, after edits.
func (s *Server) Text(messageID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.texts[messageID]
}

// Created returns the messages created so far, in order (edits and
// nonce duplicates not counted).
func (s *Server) Created() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.created...)
}

// Deleted returns the ids of the messages deleted so far.
func (s *Server) Deleted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.deleted...)
}

// Identifies and Resumes count the sessions started and resumed.
func (s *Server) Identifies() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.identifies
}

// Resumes counts successful RESUMEs.
func (s *Server) Resumes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resumes
}

// Intents is what the last IDENTIFY asked for.
func (s *Server) Intents() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.intents
}

// Connected reports whether a client holds a ready session.
func (s *Server) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current != nil && s.current.conn != nil
}

// WaitConnected waits until a client holds a ready session.
func (s *Server) WaitConnected(t testing.TB, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !s.Connected() {
		if time.Now().After(deadline) {
			t.Fatalf("discordtest: no gateway session within %s", timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Kill drops every gateway connection without a close frame, as a dead
// network does; sessions stay resumable.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.ws.Close()
		delete(s.conns, c)
	}
	for _, ss := range s.sessions {
		ss.conn = nil
	}
}

// Message is a MESSAGE_CREATE event.
type Message struct {
	ID, ChannelID, GuildID string
	AuthorID, Username     string
	Bot                    bool
	Content                string
	// Mentions are user ids mentioned.
	Mentions []string
	// ReplyTo is the id of a message by ReplyToAuthor this one answers.
	ReplyTo, ReplyToAuthor string
	Attachments            []Attachment
}

// Attachment is a file of a message.
type Attachment struct {
	ID, Filename, ContentType, URL string
	Size                           int
}

// JSON is the event's data as Discord sends it.
func (m Message) JSON() json.RawMessage {
	mentions := []map[string]any{}
	for _, id := range m.Mentions {
		mentions = append(mentions, map[string]any{"id": id, "username": "u" + id})
	}
	atts := []map[string]any{}
	for _, a := range m.Attachments {
		atts = append(atts, map[string]any{"id": a.ID, "filename": a.Filename, "content_type": a.ContentType, "url": a.URL, "proxy_url": a.URL, "size": a.Size})
	}
	d := map[string]any{
		"id": m.ID, "channel_id": m.ChannelID, "type": 0, "content": m.Content,
		"author":   map[string]any{"id": m.AuthorID, "username": m.Username, "global_name": m.Username, "bot": m.Bot},
		"mentions": mentions, "attachments": atts, "embeds": []any{}, "mention_roles": []any{},
		"timestamp": time.Now().UTC().Format(time.RFC3339), "tts": false, "pinned": false, "mention_everyone": false,
	}
	if m.GuildID != "" {
		d["guild_id"] = m.GuildID
		d["member"] = map[string]any{"roles": []any{}, "joined_at": time.Now().UTC().Format(time.RFC3339)}
	}
	if m.ReplyTo != "" {
		d["type"] = 19
		d["message_reference"] = map[string]any{"message_id": m.ReplyTo, "channel_id": m.ChannelID}
		d["referenced_message"] = map[string]any{
			"id": m.ReplyTo, "channel_id": m.ChannelID, "content": "", "type": 0,
			"author": map[string]any{"id": m.ReplyToAuthor, "username": "x"}, "mentions": []any{}, "attachments": []any{},
			"embeds": []any{}, "mention_roles": []any{}, "timestamp": time.Now().UTC().Format(time.RFC3339),
		}
	}
	raw, _ := json.Marshal(d)
	return raw
}

// Send dispatches a MESSAGE_CREATE.
func (s *Server) Send(m Message) { s.Dispatch("MESSAGE_CREATE", m.JSON()) }

// Dispatch sends an event of type typ with data (any JSON, also
// malformed) in the current session, or keeps it for a RESUME when the
// session's connection is down.
func (s *Server) Dispatch(typ string, data json.RawMessage) {
	s.mu.Lock()
	ss := s.current
	if ss == nil {
		s.mu.Unlock()
		return
	}
	ss.seq++
	ev := event{seq: ss.seq, typ: typ, data: data}
	ss.events = append(ss.events, ev)
	c := ss.conn
	s.mu.Unlock()
	if c != nil {
		_ = c.send(dispatch(ev))
	}
}

func dispatch(ev event) map[string]any {
	return map[string]any{"op": OpDispatch, "s": ev.seq, "t": ev.typ, "d": ev.data}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/gateway":
		s.gateway(w, r)
		return
	case strings.HasPrefix(r.URL.Path, "/cdn/"):
		s.mu.Lock()
		data, ok := s.files[strings.TrimPrefix(r.URL.Path, "/cdn/")]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
		return
	}
	if r.Header.Get("Authorization") != "Bot "+s.Token {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "401: Unauthorized", "code": 0})
		return
	}
	path, ok := strings.CutPrefix(r.URL.Path, "/api/v10")
	if !ok {
		http.NotFound(w, r)
		return
	}
	seg := strings.Split(strings.Trim(path, "/"), "/")
	call := Call{At: time.Now()}
	switch {
	case r.Method == http.MethodGet && path == "/gateway/bot":
		writeJSON(w, http.StatusOK, map[string]any{
			"url": "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/gateway", "shards": 1,
			"session_start_limit": map[string]any{"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1},
		})
		return
	case r.Method == http.MethodGet && path == "/users/@me":
		writeJSON(w, http.StatusOK, s.user())
		return
	case len(seg) == 3 && seg[0] == "channels" && seg[2] == "messages" && r.Method == http.MethodPost:
		call.Route, call.ChannelID = "POST /channels/{id}/messages", seg[1]
	case len(seg) == 4 && seg[0] == "channels" && seg[2] == "messages" && r.Method == http.MethodPatch:
		call.Route, call.ChannelID, call.MessageID = "PATCH /channels/{id}/messages/{id}", seg[1], seg[3]
	case len(seg) == 4 && seg[0] == "channels" && seg[2] == "messages" && r.Method == http.MethodDelete:
		call.Route, call.ChannelID, call.MessageID = "DELETE /channels/{id}/messages/{id}", seg[1], seg[3]
	case len(seg) == 3 && seg[0] == "channels" && seg[2] == "typing" && r.Method == http.MethodPost:
		call.Route, call.ChannelID = "POST /channels/{id}/typing", seg[1]
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "404: Not Found", "code": 0})
		return
	}
	if err := readBody(r, &call); err != nil {
		call.Status = http.StatusBadRequest
		s.calls.Add(call)
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body: " + err.Error(), "code": 50035})
		return
	}
	if f := s.fail.Take(call.Route); f != nil {
		call.Status = f.Status
		s.calls.Add(call)
		writeFailure(w, *f)
		return
	}
	rateHeaders(w.Header(), 49)
	switch call.Route {
	case "POST /channels/{id}/typing":
		call.Status = http.StatusNoContent
		s.calls.Add(call)
		w.WriteHeader(http.StatusNoContent)
		return
	case "DELETE /channels/{id}/messages/{id}":
		s.mu.Lock()
		_, ok := s.texts[call.MessageID]
		delete(s.texts, call.MessageID)
		s.deleted = append(s.deleted, call.MessageID)
		s.mu.Unlock()
		call.Status = http.StatusNoContent
		if !ok {
			call.Status = http.StatusNotFound
		}
		s.calls.Add(call)
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]any{"message": "Unknown Message", "code": 10008})
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	content := call.Content()
	if len([]rune(content)) > 2000 {
		call.Status = http.StatusBadRequest
		s.calls.Add(call)
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": 50035,
			"errors": map[string]any{"content": map[string]any{"_errors": []any{map[string]any{"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}}}}})
		return
	}
	s.mu.Lock()
	id := call.MessageID
	nonce, _ := call.Body["nonce"].(string)
	enforce, _ := call.Body["enforce_nonce"].(bool)
	if id == "" && enforce && nonce != "" && s.nonces[call.ChannelID+"/"+nonce] != "" {
		id, call.Duplicate = s.nonces[call.ChannelID+"/"+nonce], true
		content = s.texts[id]
	} else if id == "" {
		s.nextID++
		id = strconv.FormatInt(s.nextID, 10)
		if enforce && nonce != "" {
			s.nonces[call.ChannelID+"/"+nonce] = id
		}
		call.MessageID = id
		call.Status = http.StatusOK
		s.created = append(s.created, call)
	} else if _, ok := s.texts[id]; !ok {
		s.mu.Unlock()
		call.Status = http.StatusNotFound
		s.calls.Add(call)
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Unknown Message", "code": 10008})
		return
	}
	s.texts[id] = content
	s.mu.Unlock()
	call.Status = http.StatusOK
	s.calls.Add(call)
	writeJSON(w, http.StatusOK, map[string]any{
		"id": id, "channel_id": call.ChannelID, "content": content, "type": 0,
		"author": s.user(), "mentions": []any{}, "attachments": []any{}, "embeds": []any{}, "mention_roles": []any{},
		"timestamp": time.Now().UTC().Format(time.RFC3339), "tts": false, "pinned": false, "mention_everyone": false,
	})
}

func (s *Server) user() map[string]any {
	return map[string]any{"id": s.BotID, "username": s.BotName, "global_name": s.BotName, "bot": true, "discriminator": s.BotDiscriminator}
}

// readBody decodes a JSON or multipart (payload_json + files[n]) body.
func readBody(r *http.Request, c *Call) error {
	c.Body = map[string]any{}
	if r.ContentLength == 0 && r.Header.Get("Content-Type") == "" {
		return nil
	}
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		data, err := io.ReadAll(r.Body)
		if err != nil || len(data) == 0 {
			return err
		}
		return json.Unmarshal(data, &c.Body)
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	c.Files = map[string][]byte{}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return err
		}
		if p.FormName() == "payload_json" {
			if err := json.Unmarshal(data, &c.Body); err != nil {
				return err
			}
			continue
		}
		c.Files[p.FileName()] = data
	}
}

// rateHeaders are the bucket headers Discord sends on every answer.
func rateHeaders(h http.Header, remaining int) {
	h.Set("X-RateLimit-Bucket", "fakebucket")
	h.Set("X-RateLimit-Limit", "50")
	h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
	h.Set("X-RateLimit-Reset-After", "1.000")
	h.Set("X-RateLimit-Reset", strconv.FormatFloat(float64(time.Now().Add(time.Second).UnixMilli())/1000, 'f', 3, 64))
	h.Set("Via", "1.1 google")
}

func writeFailure(w http.ResponseWriter, f Failure) {
	if f.Status == http.StatusTooManyRequests {
		secs := f.RetryAfter.Seconds()
		rateHeaders(w.Header(), 0)
		w.Header().Set("Retry-After", strconv.Itoa(int(secs+0.999)))
		w.Header().Set("X-RateLimit-Reset-After", strconv.FormatFloat(secs, 'f', 3, 64))
		w.Header().Set("X-RateLimit-Scope", "user")
		writeJSON(w, f.Status, map[string]any{"message": f.Message, "retry_after": secs, "global": false})
		return
	}
	writeJSON(w, f.Status, map[string]any{"message": f.Message, "code": f.Code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// gateway serves one gateway connection.
func (s *Server) gateway(w http.ResponseWriter, r *http.Request) {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &conn{ws: ws}
	s.mu.Lock()
	s.conns[c] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		for _, ss := range s.sessions {
			if ss.conn == c {
				ss.conn = nil
			}
		}
		s.mu.Unlock()
		_ = ws.Close()
	}()
	if c.send(map[string]any{"op": OpHello, "d": map[string]any{"heartbeat_interval": 1000}}) != nil {
		return
	}
	for {
		var msg struct {
			Op int             `json:"op"`
			D  json.RawMessage `json:"d"`
		}
		if err := ws.ReadJSON(&msg); err != nil {
			return
		}
		switch msg.Op {
		case OpHeartbeat:
			_ = c.send(map[string]any{"op": OpHeartbeatACK})
		case OpIdentify:
			var id struct {
				Token   string `json:"token"`
				Intents int    `json:"intents"`
			}
			if json.Unmarshal(msg.D, &id) != nil || id.Token != s.Token {
				_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4004, "Authentication failed."))
				return
			}
			if id.Intents&s.Disallowed != 0 {
				_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4014, "Disallowed intent(s)."))
				return
			}
			s.mu.Lock()
			s.identifies++
			s.intents = id.Intents
			ss := &session{id: fmt.Sprintf("session-%d", s.identifies), conn: c}
			s.sessions[ss.id], s.current = ss, ss
			ss.seq++
			ready := event{seq: ss.seq, typ: "READY", data: mustJSON(map[string]any{
				"v": 10, "user": s.user(), "session_id": ss.id, "guilds": []any{},
				"resume_gateway_url": "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/gateway",
				"application":        map[string]any{"id": s.BotID, "flags": 0},
			})}
			s.mu.Unlock()
			_ = c.send(dispatch(ready))
		case OpResume:
			var res struct {
				Token     string `json:"token"`
				SessionID string `json:"session_id"`
				Seq       int    `json:"seq"`
			}
			_ = json.Unmarshal(msg.D, &res)
			s.mu.Lock()
			ss := s.sessions[res.SessionID]
			if ss == nil || res.Token != s.Token {
				s.mu.Unlock()
				_ = c.send(map[string]any{"op": OpInvalidSession, "d": false})
				continue
			}
			s.resumes++
			ss.conn, s.current = c, ss
			var missed []event
			for _, ev := range ss.events {
				if ev.seq > res.Seq {
					missed = append(missed, ev)
				}
			}
			ss.seq++
			resumed := event{seq: ss.seq, typ: "RESUMED", data: json.RawMessage(`{}`)}
			// Sent under the lock so that no new event overtakes the replay.
			for _, ev := range missed {
				_ = c.send(dispatch(ev))
			}
			_ = c.send(dispatch(resumed))
			s.mu.Unlock()
		}
	}
}

func mustJSON(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return raw
}
