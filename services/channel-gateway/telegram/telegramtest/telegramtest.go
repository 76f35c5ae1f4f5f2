// Package telegramtest is a fake Telegram Bot API server for tests. It
// speaks the real wire protocol (https://core.telegram.org/bots/api):
// methods at /bot<token>/<method> taking JSON, URL-encoded or multipart
// form parameters and answering {"ok":...,"result":...}; getUpdates long
// polling with offsets that confirm updates; files at
// /file/bot<token>/<path>; scripted failures such as 429 with
// parameters.retry_after, or 400 "can't parse entities". Like Telegram,
// it refuses a message or edit whose text is over 4,096 UTF-16 units
// after entity parsing ([MaxText]).
//
// Like Telegram, it answers a second concurrent getUpdates with 409
// Conflict and counts it, so tests can prove there is one poller.
package telegramtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/fakeplatform"
)

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

// Webhook returns the URL and secret set by setWebhook.
func (s *Server) Webhook() (url, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.webhook, s.secret
}

// Text is a sent message's current text, after edits.
func (s *Server) Text(messageID int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.texts[messageID]
}
