// Package telegramtest is a fake Telegram Bot API server for tests. It
// speaks the real wire protocol (https://core.telegram.org/bots/api):
// methods at /bot<token>/<method> taking JSON, URL-encoded or multipart
// form parameters and answering {"ok":...,"result":...}; getUpdates long
// polling with offsets that confirm updates; files at
// /file/bot<token>/<path>; scripted failures such as 429 with
// parameters.retry_after, or 400 "can't parse entities".
//
// Like Telegram, it answers a second concurrent getUpdates with 409
// Conflict and counts it, so tests can prove there is one poller.
package telegramtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/fakeplatform"
)

// Call is one API request the server received.
type Call struct {
	Method string
	// Fields are the request parameters as strings (JSON values for
	// objects, as Telegram receives them in forms).
	Fields map[string]string
	// Files are uploaded files by field name.
	Files map[string][]byte
	// At is when the server received the call.
	At time.Time
	// MessageID is the message sent or edited, when the call succeeded.
	MessageID int
}

// Failure is a scripted error answer.
type Failure struct {
	Code        int
	Description string
	RetryAfter  int
}

// TooManyRequests is a 429 asking to wait seconds.
func TooManyRequests(seconds int) Failure {
	return Failure{Code: 429, Description: "Too Many Requests: retry after " + strconv.Itoa(seconds), RetryAfter: seconds}
}

// CantParseEntities is Telegram's answer to bad HTML.
func CantParseEntities() Failure {
	return Failure{Code: 400, Description: "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0"}
}

// Server is a fake Bot API. Tests read the API calls it received,
// getUpdates excepted, by method (Calls, Next, None) and script failures
// per method (Fail, Pass).
type Server struct {
	URL   string
	Token string
	// Bot is who getMe says the bot is.
	BotID       int64
	BotUsername string

	*fakeplatform.Recorder[Call]
	fakeplatform.Script[Failure]

	srv *httptest.Server

	mu        sync.Mutex
	updates   []json.RawMessage
	ids       []int64
	newUpdate chan struct{}
	polling   bool
	conflicts int
	files     map[string]file
	nextMsgID int
	webhook   string
	secret    string
	texts     map[int]string // message id -> text, as edited
}

type file struct {
	path string
	data []byte
}

// New starts a fake for token, stopped at the end of the test.
func New(t testing.TB, token string) *Server {
	t.Helper()
	s := &Server{
		Token: token, BotID: 777, BotUsername: "nano_bot",
		Recorder: fakeplatform.NewRecorder("telegramtest calls", func(c Call) string { return c.Method }), newUpdate: make(chan struct{}),
		files: map[string]file{}, nextMsgID: 1000, texts: map[int]string{},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// AddFile makes a file downloadable by id.
func (s *Server) AddFile(id, path string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[id] = file{path: path, data: data}
}

// Conflicts is how often a second concurrent getUpdates was refused.
func (s *Server) Conflicts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conflicts
}

// Webhook returns the URL and secret set by setWebhook.
func (s *Server) Webhook() (url, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.webhook, s.secret
}

// Push queues a raw update (any JSON, also malformed) for getUpdates; id
// orders it and decides when an offset confirms it.
func (s *Server) Push(id int64, raw string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates = append(s.updates, json.RawMessage(raw))
	s.ids = append(s.ids, id)
	close(s.newUpdate)
	s.newUpdate = make(chan struct{})
}

// Message is a text message update in a chat.
type Message struct {
	UpdateID  int64
	MessageID int
	ChatID    int64
	ChatType  string // "private" (default), "group", "supergroup"
	FromID    int64
	Username  string
	Text      string
	// Extra is merged into the message object, e.g. a "photo" array.
	Extra map[string]any
}

// JSON renders the update as Telegram sends it.
func (m Message) JSON() string {
	if m.ChatType == "" {
		m.ChatType = "private"
	}
	msg := map[string]any{
		"message_id": m.MessageID,
		"date":       time.Now().Unix(),
		"chat":       map[string]any{"id": m.ChatID, "type": m.ChatType},
		"from":       map[string]any{"id": m.FromID, "is_bot": false, "first_name": "User" + strconv.FormatInt(m.FromID, 10), "username": m.Username},
	}
	if m.Text != "" {
		msg["text"] = m.Text
	}
	for k, v := range m.Extra {
		msg[k] = v
	}
	data, _ := json.Marshal(map[string]any{"update_id": m.UpdateID, "message": msg})
	return string(data)
}

// Send queues a message update.
func (s *Server) Send(m Message) { s.Push(m.UpdateID, m.JSON()) }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if p, ok := strings.CutPrefix(r.URL.Path, "/file/bot"+s.Token+"/"); ok {
		s.serveFile(w, p)
		return
	}
	method, ok := strings.CutPrefix(r.URL.Path, "/bot"+s.Token+"/")
	if !ok {
		reply(w, 404, nil, Failure{Code: 404, Description: "Not Found"})
		return
	}
	call, err := parse(r)
	if err != nil {
		reply(w, 400, nil, Failure{Code: 400, Description: "Bad Request: " + err.Error()})
		return
	}
	call.Method, call.At = method, time.Now()
	if method == "getUpdates" {
		s.getUpdates(w, r, call)
		return
	}
	s.mu.Lock()
	f := s.Script.Take(method)
	s.mu.Unlock()
	if f != nil {
		s.Recorder.Add(call)
		reply(w, f.Code, nil, *f)
		return
	}
	if method == "editMessageText" {
		s.editText(w, call)
		return
	}
	if method == "sendMessage" {
		s.mu.Lock()
		s.nextMsgID++
		call.MessageID = s.nextMsgID
		s.texts[call.MessageID] = call.Fields["text"]
		s.mu.Unlock()
	}
	s.Recorder.Add(call)
	switch method {
	case "getMe":
		reply(w, 200, map[string]any{"id": s.BotID, "is_bot": true, "first_name": "Nano", "username": s.BotUsername}, Failure{})
	case "sendMessage", "sendPhoto", "sendDocument":
		id := call.MessageID
		if id == 0 {
			s.mu.Lock()
			s.nextMsgID++
			id = s.nextMsgID
			s.mu.Unlock()
		}
		chat, _ := strconv.ParseInt(call.Fields["chat_id"], 10, 64)
		reply(w, 200, map[string]any{
			"message_id": id, "date": time.Now().Unix(),
			"chat": map[string]any{"id": chat, "type": "private"}, "text": call.Fields["text"],
		}, Failure{})
	case "deleteMessage":
		id, _ := strconv.Atoi(call.Fields["message_id"])
		s.mu.Lock()
		_, ok := s.texts[id]
		delete(s.texts, id)
		s.mu.Unlock()
		if !ok {
			reply(w, 400, nil, Failure{Code: 400, Description: "Bad Request: message to delete not found"})
			return
		}
		reply(w, 200, true, Failure{})
	case "sendChatAction", "deleteWebhook":
		reply(w, 200, true, Failure{})
	case "setWebhook":
		s.mu.Lock()
		s.webhook, s.secret = call.Fields["url"], call.Fields["secret_token"]
		s.mu.Unlock()
		reply(w, 200, true, Failure{})
	case "getFile":
		s.mu.Lock()
		f, ok := s.files[call.Fields["file_id"]]
		s.mu.Unlock()
		if !ok {
			reply(w, 400, nil, Failure{Code: 400, Description: "Bad Request: invalid file_id"})
			return
		}
		reply(w, 200, map[string]any{"file_id": call.Fields["file_id"], "file_unique_id": "u" + call.Fields["file_id"], "file_size": len(f.data), "file_path": f.path}, Failure{})
	default:
		reply(w, 404, nil, Failure{Code: 404, Description: "Not Found: method " + method})
	}
}

// editText edits a sent message's text, refusing an unknown message or
// an edit that changes nothing, as Telegram does.
func (s *Server) editText(w http.ResponseWriter, call Call) {
	id, _ := strconv.Atoi(call.Fields["message_id"])
	s.mu.Lock()
	old, ok := s.texts[id]
	if ok && old != call.Fields["text"] {
		s.texts[id] = call.Fields["text"]
		call.MessageID = id
	}
	s.mu.Unlock()
	s.Recorder.Add(call)
	switch {
	case !ok:
		reply(w, 400, nil, Failure{Code: 400, Description: "Bad Request: message to edit not found"})
	case old == call.Fields["text"]:
		reply(w, 400, nil, Failure{Code: 400, Description: "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"})
	default:
		chat, _ := strconv.ParseInt(call.Fields["chat_id"], 10, 64)
		reply(w, 200, map[string]any{
			"message_id": id, "date": time.Now().Unix(),
			"chat": map[string]any{"id": chat, "type": "private"}, "text": call.Fields["text"],
		}, Failure{})
	}
}

// Text is a sent message's current text, after edits.
func (s *Server) Text(messageID int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.texts[messageID]
}

func (s *Server) serveFile(w http.ResponseWriter, p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files {
		if f.path == p {
			_, _ = w.Write(f.data)
			return
		}
	}
	http.NotFound(w, nil)
}

func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request, c Call) {
	offset, _ := strconv.ParseInt(c.Fields["offset"], 10, 64)
	timeout, _ := strconv.Atoi(c.Fields["timeout"])
	s.mu.Lock()
	if s.polling {
		s.conflicts++
		s.mu.Unlock()
		reply(w, 409, nil, Failure{Code: 409, Description: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"})
		return
	}
	s.polling = true
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.polling = false; s.mu.Unlock() }()

	deadline := time.After(time.Duration(timeout) * time.Second)
	for {
		s.mu.Lock()
		// An offset confirms every update before it.
		keepU, keepI := s.updates[:0:0], s.ids[:0:0]
		for i, id := range s.ids {
			if offset == 0 || id >= offset {
				keepU, keepI = append(keepU, s.updates[i]), append(keepI, id)
			}
		}
		s.updates, s.ids = keepU, keepI
		pending := append([]json.RawMessage(nil), s.updates...)
		wake := s.newUpdate
		s.mu.Unlock()
		if len(pending) > 0 {
			reply(w, 200, pending, Failure{})
			return
		}
		select {
		case <-wake:
		case <-deadline:
			reply(w, 200, []json.RawMessage{}, Failure{})
			return
		case <-r.Context().Done():
			return
		}
	}
}

func reply(w http.ResponseWriter, code int, result any, f Failure) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	body := map[string]any{"ok": code == 200}
	if code == 200 {
		body["result"] = result
	} else {
		body["error_code"] = f.Code
		body["description"] = f.Description
		if f.RetryAfter > 0 {
			body["parameters"] = map[string]any{"retry_after": f.RetryAfter}
		}
	}
	_ = json.NewEncoder(w).Encode(body)
}

// parse reads the parameters of a request in any of the encodings the Bot
// API accepts.
func parse(r *http.Request) (Call, error) {
	c := Call{Fields: map[string]string{}, Files: map[string][]byte{}}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		var m map[string]any
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil && err != io.EOF {
			return c, err
		}
		for k, v := range m {
			if s, ok := v.(string); ok {
				c.Fields[k] = s
				continue
			}
			data, _ := json.Marshal(v)
			c.Fields[k] = string(data)
		}
	case "multipart/form-data":
		if err := r.ParseMultipartForm(32 << 20); errors.Is(err, io.EOF) {
			return c, nil // a method without parameters: an empty form
		} else if err != nil {
			return c, err
		}
		for k, v := range r.MultipartForm.Value {
			c.Fields[k] = v[0]
		}
		for k, fhs := range r.MultipartForm.File {
			f, err := fhs[0].Open()
			if err != nil {
				return c, err
			}
			data, _ := io.ReadAll(f)
			f.Close()
			c.Files[k] = data
		}
	default:
		if err := r.ParseForm(); err != nil {
			return c, fmt.Errorf("form: %w", err)
		}
		for k, v := range r.Form {
			c.Fields[k] = v[0]
		}
	}
	return c, nil
}
