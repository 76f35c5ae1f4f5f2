// Package dingtalktest is a fake DingTalk for tests, speaking the real
// wire protocol: the stream gateway (POST /v1.0/gateway/connections/open
// hands out a WebSocket endpoint and ticket; JSON data frames carry
// SYSTEM pings and CALLBACK robot messages, each acknowledged by the
// client with a response frame of the same messageId), the app access
// token, the robot send API (one-to-one batchSend and group send), the
// message file download, the media upload (multipart media/upload on the
// older oapi, whose media ids the robot's picture and file messages must
// name), AI cards (card/instances/createAndDeliver, then card/streaming
// updates replacing their content), and per-message session webhooks that
// expire. Scripted failures include HTTP 429 with Retry-After.
package dingtalktest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/fakeplatform"
)

// Credentials the fake accepts.
const (
	ClientID     = "ding-test-app"
	ClientSecret = "ding-secret"
	token        = "fake-access-token"
)

// Call is one request to the fake's send APIs.
type Call struct {
	// Kind is "webhook", "otosend", "groupsend", "token", "download",
	// "upload", "cardcreate" or "cardstream".
	Kind string
	// Session is the session webhook's id (webhook).
	Session string
	// Body is the JSON body; for an upload, type and filename.
	Body map[string]any
	// Upload is an upload's bytes, and MediaID the id the fake gave them
	// ("" when it refused them).
	Upload  []byte
	MediaID string
	// At is when the fake received the call.
	At time.Time
	// Expired is true when a webhook call came after its expiry.
	Expired bool
}

// Str returns a body field as a string.
func (c Call) Str(key string) string {
	s, _ := c.Body[key].(string)
	return s
}

// Markdown returns the title and text of a markdown message, whichever
// API carried it.
func (c Call) Markdown() (title, text string) {
	if c.Kind == "webhook" {
		md, _ := c.Body["markdown"].(map[string]any)
		title, _ = md["title"].(string)
		text, _ = md["text"].(string)
		return
	}
	var p map[string]string
	_ = json.Unmarshal([]byte(c.Str("msgParam")), &p)
	return p["title"], p["text"]
}

// Failure is a scripted error answer.
type Failure struct {
	Status     int
	RetryAfter int
	// Code is the open API's error code, ErrCode the webhook's.
	Code    string
	ErrCode int
	// Hold, when set, makes this no failure: the call is taken as usual
	// and answered once Hold is closed, whether or not the client still
	// waits (a send the platform made while its answer was lost), or a
	// minute later, so that a test failing before it closes Hold does not
	// hang in the server's Close.
	Hold <-chan struct{}
}

// held waits for f's hold and reports whether f is only that.
func (f *Failure) held() bool {
	if f.Hold == nil {
		return false
	}
	select {
	case <-f.Hold:
	case <-time.After(time.Minute):
	}
	return true
}

// Ack is the client's response to a frame.
type Ack struct {
	MessageID string
	Code      int
	Data      string
}

// Server is a fake DingTalk. Tests read the API calls it received by
// kind (Calls, Next, None), script failures per kind (Fail, Pass), and
// wait for stream connections (WaitConnected, WaitConnections,
// Connections).
type Server struct {
	// URL is the open API base (what channels.dingtalk.apiUrl takes).
	URL string

	*fakeplatform.Recorder[Call]
	fakeplatform.Script[Failure]
	fakeplatform.Link
	fakeplatform.Stamp // what each call's At is read from

	files fakeplatform.Files          // downloadable
	acks  *fakeplatform.Recorder[Ack] // by the frame id answered

	mu       sync.Mutex
	frames   int
	sessions map[string]time.Time
	media    map[string][]byte // media id → uploaded bytes
	cards    map[string]string // outTrackId → the card's content
}

// New starts a fake, stopped at the end of the test.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		Recorder: fakeplatform.NewRecorder("dingtalktest calls", func(c Call) string { return c.Kind }), acks: fakeplatform.NewRecorder("dingtalktest acks", func(a Ack) string { return a.MessageID }),
		sessions: map[string]time.Time{}, media: map[string][]byte{}, cards: map[string]string{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1.0/gateway/connections/open", s.serveOpen)
	mux.HandleFunc("/stream", s.serveStream)
	mux.HandleFunc("POST /v1.0/oauth2/accessToken", s.serveToken)
	mux.HandleFunc("POST /v1.0/robot/oToMessages/batchSend", s.api("otosend"))
	mux.HandleFunc("POST /v1.0/robot/groupMessages/send", s.api("groupsend"))
	mux.HandleFunc("POST /v1.0/robot/messageFiles/download", s.api("download"))
	mux.HandleFunc("POST /robot/sendBySession/{session}", s.serveWebhook)
	mux.HandleFunc("GET /files/{code}", s.serveFile)
	mux.HandleFunc("POST /media/upload", s.serveUpload)
	mux.HandleFunc("POST /v1.0/card/instances/createAndDeliver", s.api("cardcreate"))
	mux.HandleFunc("PUT /v1.0/card/streaming", s.api("cardstream"))
	s.URL = fakeplatform.Serve(t, mux, &s.Link)
	return s
}

// AddFile makes a file downloadable by its download code.
func (s *Server) AddFile(code string, data []byte) { s.files.Add(code, data) }

// Message is a robot message.
type Message struct {
	MsgID, StaffID, Nick string
	// ConversationID is the chat; Group selects a group chat
	// (conversationType "2") rather than one-to-one ("1").
	ConversationID string
	Group          bool
	// AtBot marks the bot as mentioned (isInAtList).
	AtBot bool
	Text  string
	// Type and Content, when set, replace the text message.
	Type    string
	Content map[string]any
	// WebhookTTL is how long the session webhook stays valid (default an
	// hour; negative: already expired).
	WebhookTTL time.Duration
}

// Send sends m as a CALLBACK frame and returns the frame's messageId.
func (s *Server) Send(t testing.TB, m Message) string {
	t.Helper()
	ttl := m.WebhookTTL
	if ttl == 0 {
		ttl = time.Hour
	}
	s.mu.Lock()
	session := fmt.Sprintf("sess-%d", len(s.sessions)+1)
	expires := time.Now().Add(ttl)
	s.sessions[session] = expires
	s.mu.Unlock()
	convType := "1"
	if m.Group {
		convType = "2"
	}
	data := map[string]any{
		"conversationId": m.ConversationID, "chatbotCorpId": "corp1", "chatbotUserId": "$:bot",
		"msgId": m.MsgID, "senderNick": m.Nick, "isAdmin": false, "senderStaffId": m.StaffID,
		"sessionWebhookExpiredTime": expires.UnixMilli(), "createAt": time.Now().UnixMilli(),
		"senderCorpId": "corp1", "conversationType": convType, "senderId": "$:LWCP_" + m.StaffID,
		"isInAtList": m.AtBot, "sessionWebhook": s.URL + "/robot/sendBySession/" + session,
		"robotCode": ClientID, "msgtype": "text", "text": map[string]any{"content": m.Text},
	}
	if m.Group {
		data["conversationTitle"] = "team"
	}
	if m.Type != "" {
		data["msgtype"], data["content"] = m.Type, m.Content
		delete(data, "text")
	}
	raw, _ := json.Marshal(data)
	return s.Frame(t, "CALLBACK", "/v1.0/im/bot/messages/get", string(raw))
}

// Frame sends a data frame of type and topic with data, and returns its
// messageId.
func (s *Server) Frame(t testing.TB, typ, topic, data string) string {
	t.Helper()
	s.mu.Lock()
	s.frames++
	id := fmt.Sprintf("frame-%d", s.frames)
	s.mu.Unlock()
	raw, _ := json.Marshal(map[string]any{
		"specVersion": "1.0", "type": typ, "time": time.Now().UnixMilli(),
		"headers": map[string]string{
			"appId": "app1", "connectionId": "conn1", "contentType": "application/json",
			"messageId": id, "time": strconv.FormatInt(time.Now().UnixMilli(), 10), "topic": topic,
		},
		"data": data,
	})
	s.Raw(t, raw)
	return id
}

// Raw writes a raw text frame on the stream connection.
func (s *Server) Raw(t testing.TB, data []byte) {
	t.Helper()
	s.Link.Write(t, websocket.MessageText, data)
}

// WaitAck waits until the client answered frame id and returns its answer.
func (s *Server) WaitAck(t testing.TB, id string, timeout time.Duration) Ack {
	t.Helper()
	return s.acks.Next(t, timeout, id)
}

// MediaLimit is the media upload's size limit.
const MediaLimit = 20 << 20

// Card returns the current content of an AI card, "" for an unknown one.
func (s *Server) Card(outTrackID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cards[outTrackID]
}

// Uploaded returns the bytes uploaded under a media id, or nil.
func (s *Server) Uploaded(mediaID string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.media[mediaID]
}

// Param decodes a robot send's msgParam.
func (c Call) Param() map[string]string {
	var p map[string]string
	_ = json.Unmarshal([]byte(c.Str("msgParam")), &p)
	return p
}
