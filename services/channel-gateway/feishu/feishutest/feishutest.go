// Package feishutest is a fake Feishu / Lark open platform for tests. It
// speaks the real wire protocol: the long-connection endpoint discovery
// (POST /callback/ws/endpoint), the WebSocket that carries protobuf frames
// (events as data frames, answered by the client with a response frame
// of the same message id; pings answered with pongs), the tenant access
// token, bot info, message create and reply (with uuid deduplication, as
// the platform does within an hour), message resources, and image and
// file uploads (multipart im/v1/images and im/v1/files, with the
// platform's size limits; an image or file message must name an uploaded
// key). Scripted
// failures include the gateway's rate-limit answer (HTTP 429, code
// 99991400, x-ogw-ratelimit-reset). For webhook mode it signs and
// encrypts event bodies the way the platform does.
package feishutest

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	larkws "github.com/larksuite/oapi-sdk-go/v3/ws"

	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/fakeplatform"
)

// Credentials the fake accepts: any app id starting with cli_, with
// AppSecret.
const (
	AppID     = "cli_test"
	AppSecret = "secret"
	// BotOpenID is the bot's open id that bot info reports.
	BotOpenID = "ou_bot"
	token     = "t-fake-tenant-token"
)

// Call is one open API request.
type Call struct {
	// Kind is "create", "reply", "patch" (a card update), "delete",
	// "resource",
	// "image" or "file" (an upload), "token" or "botinfo".
	Kind string
	// Parent is the message replied to (reply), updated (patch), deleted
	// (delete) or read (resource).
	Parent string
	// Query holds the query parameters (receive_id_type, type).
	Query map[string]string
	// Body is the JSON body: receive_id, msg_type, content, uuid; for an
	// upload, the form fields (image_type, or file_type and file_name).
	Body map[string]any
	// Upload is an upload's file part, and Key the key the fake gave it
	// ("" when it refused it).
	Upload []byte
	Key    string
	// Duplicate is true when the uuid was seen before, so the platform
	// sent nothing.
	Duplicate bool
	// ID is the id of the message a create or reply made.
	ID string
	// At is when the fake received the call.
	At time.Time
}

// Content decodes the call's content field (a JSON string).
func (c Call) Content() map[string]any {
	var v map[string]any
	s, _ := c.Body["content"].(string)
	_ = json.Unmarshal([]byte(s), &v)
	return v
}

// Str returns a body field as a string.
func (c Call) Str(key string) string {
	s, _ := c.Body[key].(string)
	return s
}

// Failure is a scripted error answer.
type Failure struct {
	// Status is the HTTP status (default 400).
	Status int
	// Code and Msg form the body.
	Code int
	Msg  string
	// Reset is the x-ogw-ratelimit-reset header, in seconds.
	Reset int
}

// RateLimited is the gateway's answer to too many requests.
func RateLimited(reset int) Failure {
	return Failure{Status: http.StatusTooManyRequests, Code: 99991400, Msg: "request trigger frequency limit", Reset: reset}
}

// Server is a fake open platform. Tests read the open API calls it
// received by kind (Calls, Next, None), script failures per kind (Fail,
// Pass), and wait for long connections (WaitConnected, WaitConnections,
// Connections).
type Server struct {
	// URL is the base URL (what channels.feishu.baseUrl takes).
	URL string

	*fakeplatform.Recorder[Call]
	fakeplatform.Script[Failure]
	fakeplatform.Link

	srv  *httptest.Server
	acks *fakeplatform.Recorder[Ack] // by the frame id answered

	mu        sync.Mutex
	seen      map[string]bool
	msgs      int
	frames    uint64
	resources map[string][]byte
	contents  map[string]string // message id → its current content
	uploads   map[string][]byte // image or file key → its bytes
}

// Ack is the client's response to an event frame.
type Ack struct {
	MessageID string
	Code      int
}

// New starts a fake, stopped at the end of the test.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		Recorder: fakeplatform.NewRecorder("feishutest calls", func(c Call) string { return c.Kind }), acks: fakeplatform.NewRecorder("feishutest acks", func(a Ack) string { return a.MessageID }),
		seen: map[string]bool{}, resources: map[string][]byte{}, contents: map[string]string{}, uploads: map[string][]byte{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /callback/ws/endpoint", s.serveEndpoint)
	mux.HandleFunc("/ws", s.serveSocket)
	mux.HandleFunc("POST /open-apis/auth/v3/tenant_access_token/internal", s.serveToken)
	mux.HandleFunc("GET /open-apis/bot/v3/info", s.api("botinfo"))
	mux.HandleFunc("POST /open-apis/im/v1/messages", s.api("create"))
	mux.HandleFunc("POST /open-apis/im/v1/messages/{id}/reply", s.api("reply"))
	mux.HandleFunc("PATCH /open-apis/im/v1/messages/{id}", s.api("patch"))
	mux.HandleFunc("DELETE /open-apis/im/v1/messages/{id}", s.api("delete"))
	mux.HandleFunc("GET /open-apis/im/v1/messages/{id}/resources/{key}", s.api("resource"))
	mux.HandleFunc("POST /open-apis/im/v1/images", s.serveUpload("image", ImageLimit))
	mux.HandleFunc("POST /open-apis/im/v1/files", s.serveUpload("file", FileLimit))
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	t.Cleanup(func() {
		s.Link.Close()
		s.srv.Close()
	})
	return s
}

// AddResource makes a message's image or file downloadable.
func (s *Server) AddResource(messageID, key string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resources[messageID+"/"+key] = data
}

// Send sends an event (the whole schema 2.0 JSON object) as one data
// frame and returns the frame's message id.
func (s *Server) Send(t testing.TB, event map[string]any) string {
	t.Helper()
	data, err := json.Marshal(event)
	if err != nil {
		t.Fatalf("feishutest: %v", err)
	}
	return s.SendPayload(t, data, 1)
}

// SendPayload sends payload as an event split over parts data frames, as
// the platform splits large events, and returns their message id.
func (s *Server) SendPayload(t testing.TB, payload []byte, parts int) string {
	t.Helper()
	s.mu.Lock()
	s.frames++
	id := fmt.Sprintf("msg-%d", s.frames)
	s.mu.Unlock()
	size := (len(payload) + parts - 1) / parts
	for i := range parts {
		chunk := payload[min(i*size, len(payload)):min((i+1)*size, len(payload))]
		f := larkws.Frame{
			SeqID: uint64(i), Service: 1, Method: int32(larkws.FrameTypeData),
			Headers: []larkws.Header{
				{Key: larkws.HeaderType, Value: string(larkws.MessageTypeEvent)},
				{Key: larkws.HeaderMessageID, Value: id},
				{Key: larkws.HeaderTraceID, Value: "trace-" + id},
				{Key: larkws.HeaderSum, Value: strconv.Itoa(parts)},
				{Key: larkws.HeaderSeq, Value: strconv.Itoa(i)},
			},
			Payload: chunk,
		}
		data, err := f.Marshal()
		if err != nil {
			t.Fatalf("feishutest: %v", err)
		}
		s.Raw(t, data)
	}
	return id
}

// Raw writes a raw binary message on the long connection.
func (s *Server) Raw(t testing.TB, data []byte) {
	t.Helper()
	s.Link.Write(t, websocket.MessageBinary, data)
}

// WaitAck waits until the client answered the event frame id, and returns
// the code it answered with.
func (s *Server) WaitAck(t testing.TB, id string, timeout time.Duration) int {
	t.Helper()
	return s.acks.Next(t, timeout, id).Code
}

// Content returns the current content of a message the bot sent (after
// its updates), or "" for an unknown or deleted id.
func (s *Server) Content(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.contents[id]
}

// CardText returns the markdown of an interactive card's content JSON,
// or "" when it is not a one-element markdown card.
func CardText(content string) string {
	var card struct {
		Elements []struct {
			Tag     string `json:"tag"`
			Content string `json:"content"`
		} `json:"elements"`
	}
	if json.Unmarshal([]byte(content), &card) != nil || len(card.Elements) != 1 || card.Elements[0].Tag != "markdown" {
		return ""
	}
	return card.Elements[0].Content
}

// Mention is someone mentioned in a message.
type Mention struct {
	Key, OpenID, Name string
}

// BotMention mentions the bot as @_user_1.
var BotMention = Mention{Key: "@_user_1", OpenID: BotOpenID, Name: "nano"}

// Message is an im.message.receive_v1 event with a message of msgType
// and content (encoded as the platform does, a JSON string).
func Message(eventID, sender, chat, chatType, messageID, msgType string, content any, mentions ...Mention) map[string]any {
	c, _ := json.Marshal(content)
	var ms []map[string]any
	for _, m := range mentions {
		ms = append(ms, map[string]any{
			"key": m.Key, "name": m.Name, "tenant_key": "tk",
			"id": map[string]any{"open_id": m.OpenID, "union_id": "on_" + m.OpenID, "user_id": ""},
		})
	}
	return map[string]any{
		"schema": "2.0",
		"header": map[string]any{
			"event_id": eventID, "event_type": "im.message.receive_v1", "app_id": AppID,
			"tenant_key": "tk", "create_time": strconv.FormatInt(time.Now().UnixMilli(), 10), "token": "",
		},
		"event": map[string]any{
			"sender": map[string]any{
				"sender_id":   map[string]any{"open_id": sender, "union_id": "on_" + sender, "user_id": "u_" + sender},
				"sender_type": "user", "tenant_key": "tk",
			},
			"message": map[string]any{
				"message_id": messageID, "chat_id": chat, "chat_type": chatType, "message_type": msgType,
				"content": string(c), "mentions": ms, "create_time": strconv.FormatInt(time.Now().UnixMilli(), 10),
			},
		},
	}
}

// Text is a text message event.
func Text(eventID, sender, chat, chatType, messageID, text string, mentions ...Mention) map[string]any {
	return Message(eventID, sender, chat, chatType, messageID, "text", map[string]string{"text": text}, mentions...)
}

// Webhook posts event to a webhook URL as the platform does in webhook
// mode: encrypted with encryptKey and signed with it (sign=false sends a
// wrong signature). It returns the HTTP status.
func Webhook(t testing.TB, url, encryptKey string, event map[string]any, sign bool) int {
	t.Helper()
	return WebhookAt(t, url, encryptKey, event, sign, time.Now(), rand.Text()[:8])
}

// WebhookAt is [Webhook] with the request's timestamp and nonce given, to
// send a request as it was signed earlier (a replay).
func WebhookAt(t testing.TB, url, encryptKey string, event map[string]any, sign bool, at time.Time, nonce string) int {
	t.Helper()
	plain, _ := json.Marshal(event)
	body, _ := json.Marshal(map[string]string{"encrypt": Encrypt(plain, encryptKey)})
	ts := strconv.FormatInt(at.Unix(), 10)
	sig := Signature(ts, nonce, encryptKey, body)
	if !sign {
		sig = Signature(ts, nonce, "another key", body)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Lark-Request-Timestamp", ts)
	req.Header.Set("X-Lark-Request-Nonce", nonce)
	req.Header.Set("X-Lark-Signature", sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("feishutest: webhook: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Signature is the platform's request signature: hex SHA-256 of
// timestamp, nonce, encrypt key and body.
func Signature(ts, nonce, encryptKey string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(ts + nonce + encryptKey))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// Encrypt encrypts an event body as the platform does: AES-256-CBC with
// the SHA-256 of the encrypt key, a random IV in front, PKCS#7 padding,
// base64.
func Encrypt(plain []byte, encryptKey string) string {
	key := sha256.Sum256([]byte(encryptKey))
	block, _ := aes.NewCipher(key[:])
	pad := aes.BlockSize - len(plain)%aes.BlockSize
	plain = append(plain, bytes.Repeat([]byte{byte(pad)}, pad)...)
	out := make([]byte, aes.BlockSize+len(plain))
	_, _ = rand.Read(out[:aes.BlockSize])
	cipher.NewCBCEncrypter(block, out[:aes.BlockSize]).CryptBlocks(out[aes.BlockSize:], plain)
	return base64.StdEncoding.EncodeToString(out)
}

func (s *Server) serveEndpoint(w http.ResponseWriter, r *http.Request) {
	var req struct{ AppID, AppSecret string }
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !strings.HasPrefix(req.AppID, "cli_") || req.AppSecret != AppSecret {
		writeJSON(w, http.StatusOK, map[string]any{"code": 1000040351, "msg": "invalid app credentials"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "ok", "data": map[string]any{
		"URL":          "ws" + strings.TrimPrefix(s.URL, "http") + "/ws?device_id=dev1&service_id=7",
		"ClientConfig": map[string]any{"ReconnectCount": -1, "ReconnectInterval": 1, "ReconnectNonce": 0, "PingInterval": 1},
	}})
}

func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	var req struct {
		AppID     string `json:"app_id"`
		AppSecret string `json:"app_secret"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	s.Recorder.Add(Call{Kind: "token"})
	if !strings.HasPrefix(req.AppID, "cli_") || req.AppSecret != AppSecret {
		writeJSON(w, http.StatusOK, map[string]any{"code": 10014, "msg": "app secret invalid"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "ok", "tenant_access_token": token, "expire": 7200})
}

// api serves one open API method, checking the tenant token.
func (s *Server) api(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"code": 99991663, "msg": "Invalid access token for authorization"})
			return
		}
		c := Call{Kind: kind, Parent: r.PathValue("id"), Query: map[string]string{}, Body: map[string]any{}, At: time.Now()}
		for k, v := range r.URL.Query() {
			c.Query[k] = v[0]
		}
		if r.Method == http.MethodPost || r.Method == http.MethodPatch {
			if err := json.NewDecoder(r.Body).Decode(&c.Body); err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]any{"code": 9499, "msg": "bad json: " + err.Error()})
				return
			}
		}
		s.mu.Lock()
		f := s.Script.Take(kind)
		uuid := c.Str("uuid")
		if f == nil && uuid != "" {
			c.Duplicate = s.seen[uuid]
			s.seen[uuid] = true
		}
		s.msgs++
		id := fmt.Sprintf("om_%d", s.msgs)
		data, found := s.resources[c.Parent+"/"+r.PathValue("key")]
		_, exists := s.contents[c.Parent]
		s.mu.Unlock()
		if kind == "create" || kind == "reply" {
			c.ID = id
		}
		s.Recorder.Add(c)
		if f != nil {
			f.write(w)
			return
		}
		switch kind {
		case "botinfo":
			writeJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "ok", "bot": map[string]any{
				"activate_status": 2, "app_name": "nano", "open_id": BotOpenID,
			}})
		case "patch":
			if !exists || !strings.Contains(c.Str("content"), `"update_multi":true`) {
				writeJSON(w, http.StatusBadRequest, map[string]any{"code": 230001, "msg": "message not found or not an updatable card"})
				return
			}
			s.mu.Lock()
			s.contents[c.Parent] = c.Str("content")
			s.mu.Unlock()
			writeJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "success", "data": map[string]any{}})
		case "delete":
			if !exists {
				writeJSON(w, http.StatusBadRequest, map[string]any{"code": 230001, "msg": "message not found"})
				return
			}
			s.mu.Lock()
			delete(s.contents, c.Parent)
			s.mu.Unlock()
			writeJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "success", "data": map[string]any{}})
		case "create", "reply":
			if kind == "create" && c.Query["receive_id_type"] != "chat_id" {
				writeJSON(w, http.StatusBadRequest, map[string]any{"code": 230001, "msg": "invalid receive_id_type"})
				return
			}
			var probe map[string]any
			if err := json.Unmarshal([]byte(c.Str("content")), &probe); err != nil || c.Str("msg_type") == "" {
				writeJSON(w, http.StatusBadRequest, map[string]any{"code": 230001, "msg": "invalid content"})
				return
			}
			if t := c.Str("msg_type"); t == "image" || t == "file" {
				key, _ := probe[t+"_key"].(string)
				s.mu.Lock()
				_, uploaded := s.uploads[key]
				s.mu.Unlock()
				if !uploaded {
					writeJSON(w, http.StatusBadRequest, map[string]any{"code": 230001, "msg": "invalid " + t + "_key"})
					return
				}
			}
			s.mu.Lock()
			s.contents[id] = c.Str("content")
			s.mu.Unlock()
			writeJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "success", "data": map[string]any{
				"message_id": id, "chat_id": c.Str("receive_id"), "msg_type": c.Str("msg_type"),
			}})
		case "resource":
			if !found {
				writeJSON(w, http.StatusBadRequest, map[string]any{"code": 234003, "msg": "file not found"})
				return
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Disposition", `attachment; filename="`+r.PathValue("key")+`.bin"`)
			_, _ = w.Write(data)
		}
	}
}

// Upload limits of the platform.
const (
	ImageLimit = 10 << 20
	FileLimit  = 30 << 20
)

// serveUpload serves im/v1/images (kind "image") or im/v1/files ("file"):
// a multipart form with the bytes in the part named kind, refused when
// empty, over limit or without the fields the platform requires.
func (s *Server) serveUpload(kind string, limit int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"code": 99991663, "msg": "Invalid access token for authorization"})
			return
		}
		if err := r.ParseMultipartForm(int64(limit) + 1<<20); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"code": 9499, "msg": "bad multipart form: " + err.Error()})
			return
		}
		c := Call{Kind: kind, Query: map[string]string{}, Body: map[string]any{}, At: time.Now()}
		for k, v := range r.MultipartForm.Value {
			c.Body[k] = v[0]
		}
		file, _, ferr := r.FormFile(kind)
		if ferr == nil {
			c.Upload, ferr = io.ReadAll(file)
			file.Close()
		}
		refusal := Failure{Code: 234001, Msg: "invalid request param"}
		s.mu.Lock()
		f := s.Script.Take(kind)
		switch {
		case f != nil:
			refusal = *f
		case ferr != nil:
		case len(c.Upload) == 0:
			refusal.Code, refusal.Msg = 234010, "file size can't be 0"
		case len(c.Upload) > limit:
			refusal.Code, refusal.Msg = 234006, "file size exceeds the limit"
		case kind == "image" && c.Str("image_type") != "message":
		case kind == "file" && (c.Str("file_type") == "" || c.Str("file_name") == ""):
		default:
			s.msgs++
			c.Key = fmt.Sprintf("%s_v3_%d", kind, s.msgs)
			s.uploads[c.Key] = c.Upload
		}
		s.mu.Unlock()
		s.Recorder.Add(c)
		if c.Key == "" {
			refusal.write(w)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "success", "data": map[string]string{kind + "_key": c.Key}})
	}
}

// Uploaded returns the bytes uploaded under an image or file key, or nil.
func (s *Server) Uploaded(key string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.uploads[key]
}

// write answers with the failure.
func (f Failure) write(w http.ResponseWriter) {
	if f.Reset > 0 {
		w.Header().Set("x-ogw-ratelimit-reset", strconv.Itoa(f.Reset))
	}
	status := f.Status
	if status == 0 {
		status = http.StatusBadRequest
	}
	writeJSON(w, status, map[string]any{"code": f.Code, "msg": f.Msg})
}

func (s *Server) serveSocket(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("device_id") == "" {
		http.Error(w, "no device", http.StatusBadRequest)
		return
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	c.SetReadLimit(16 << 20)
	defer s.Link.Open(c)() // the platform keeps one connection per client here
	ctx := r.Context()
	for {
		kind, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		var f larkws.Frame
		if kind != websocket.MessageBinary || f.Unmarshal(data) != nil {
			continue
		}
		hs := larkws.Headers(f.Headers)
		switch larkws.FrameType(f.Method) {
		case larkws.FrameTypeControl:
			if larkws.MessageType(hs.GetString(larkws.HeaderType)) == larkws.MessageTypePing {
				pong := larkws.Frame{Service: f.Service, Method: int32(larkws.FrameTypeControl),
					Headers: []larkws.Header{{Key: larkws.HeaderType, Value: string(larkws.MessageTypePong)}}}
				pong.Payload, _ = json.Marshal(larkws.ClientConfig{ReconnectCount: -1, ReconnectInterval: 1, PingInterval: 1})
				out, _ := pong.Marshal()
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_ = c.Write(wctx, websocket.MessageBinary, out)
				cancel()
			}
		case larkws.FrameTypeData:
			var resp larkws.Response
			if json.Unmarshal(f.Payload, &resp) == nil {
				s.acks.Add(Ack{MessageID: hs.GetString(larkws.HeaderMessageID), Code: resp.StatusCode})
			}
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
