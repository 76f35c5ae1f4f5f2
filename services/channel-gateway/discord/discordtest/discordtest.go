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
	"net/http"
	"net/http/httptest"
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

// Server is a fake Discord. Tests read the REST calls it received, the
// gateway and user look-ups excepted, by route (Calls, Next, None) and
// script failures per route (Fail, Pass, FailAll).
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

	*fakeplatform.Recorder[Call]
	fakeplatform.Script[Failure]

	srv   *httptest.Server
	files fakeplatform.Files // downloadable

	mu         sync.Mutex
	refusing   bool // gateway connections answered 503, as while Discord is down
	accepted   int  // gateway connections accepted
	refused    int  // and refused
	conns      map[*conn]bool
	sessions   map[string]*session
	current    *session
	ready      chan struct{} // closed and replaced when a session becomes ready
	identifies int
	resumes    int
	intents    int
	nextID     int64
	texts      map[string]string // message id -> content, as edited
	nonces     map[string]string // channel + nonce -> message id
	created    []Call
	deleted    []string
}

// New starts a fake for token, stopped at the end of the test. Under
// -race it skips the test instead (see skipDisgoRace).
func New(t testing.TB, token string) *Server {
	t.Helper()
	skipDisgoRace(t)
	s := &Server{
		Token: token, BotID: "900000000000000001", BotName: "nanobot", BotDiscriminator: "0",
		Recorder: fakeplatform.NewRecorder("discordtest calls", func(c Call) string { return c.Route }), conns: map[*conn]bool{}, sessions: map[string]*session{},
		texts: map[string]string{}, nonces: map[string]string{}, ready: make(chan struct{}),
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

// FailAll makes every call of route fail as f until the test ends.
func (s *Server) FailAll(route string, f Failure) {
	fs := make([]Failure, 10000)
	for i := range fs {
		fs[i] = f
	}
	s.Fail(route, fs...)
}

// AddFile serves data at the returned attachment URL.
func (s *Server) AddFile(name string, data []byte) string {
	s.files.Add(name, data)
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
	return s.connected()
}

// connected is Connected, called with s.mu held.
func (s *Server) connected() bool { return s.current != nil && s.current.conn != nil }

// readied wakes the tests waiting for a ready session; called with s.mu
// held when one becomes ready (READY or RESUMED).
func (s *Server) readied() {
	close(s.ready)
	s.ready = make(chan struct{})
}

// WaitConnected waits until a client holds a ready session.
func (s *Server) WaitConnected(t testing.TB, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		ok, ready := s.connected(), s.ready
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ready:
		case <-deadline:
			t.Fatalf("discordtest: no gateway session within %s", timeout)
		}
	}
}

// Refuse makes the gateway answer connections 503 (on) or take them
// again (off), as while Discord is down.
func (s *Server) Refuse(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refusing = on
}

// Conns is how many gateway connections are open, and how many were
// ever accepted and refused.
func (s *Server) Conns() (open, accepted, refused int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns), s.accepted, s.refused
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

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
