// Package feishutest is a fake Feishu / Lark open platform for tests. It
// speaks the real wire protocol: the long-connection endpoint discovery
// (POST /callback/ws/endpoint), the WebSocket that carries protobuf frames
// (events as data frames, answered by the client with a response frame
// of the same message id; pings answered with pongs), the tenant access
// token, bot info, message create and reply (with uuid deduplication, as
// the platform does within an hour), message resources, and image and
// file uploads (multipart im/v1/images and im/v1/files, with the
// platform's size limits; an image or file message must name an uploaded
// key), refusing a message over the platform's request size limits
// ([MaxTextBody], [MaxCardBody]) with code 230025. Scripted
// failures include the gateway's rate-limit answer (HTTP 429, code
// 99991400, x-ogw-ratelimit-reset). For webhook mode it signs and
// encrypts event bodies the way the platform does.
package feishutest

import (
	"net/http"
	"sync"
	"testing"

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

// Server is a fake open platform. Tests read the open API calls it
// received by kind (Calls, Next, None), script failures per kind (Fail,
// Pass), and wait for long connections (WaitConnected, WaitConnections,
// Connections).
type Server struct {
	// URL is the base URL (what channels.feishu.baseUrl takes).
	URL string
	// PingInterval is the seconds the endpoint and every pong ask the
	// client to ping after; 0 is 1. Set it before the client connects.
	PingInterval int

	*fakeplatform.Recorder[Call]
	fakeplatform.Script[Failure]
	fakeplatform.Link
	fakeplatform.Stamp // what each call's At is read from

	acks *fakeplatform.Recorder[Ack] // by the frame id answered

	mu        sync.Mutex
	seen      map[string]bool
	msgs      int
	frames    uint64
	pings     int
	resources map[string][]byte
	served    map[string]int64  // bytes of each resource written to a client
	contents  map[string]string // message id → its current content
	uploads   map[string][]byte // image or file key → its bytes
}

// New starts a fake, stopped at the end of the test.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		Recorder: fakeplatform.NewRecorder("feishutest calls", func(c Call) string { return c.Kind }), acks: fakeplatform.NewRecorder("feishutest acks", func(a Ack) string { return a.MessageID }),
		seen: map[string]bool{}, resources: map[string][]byte{}, served: map[string]int64{}, contents: map[string]string{}, uploads: map[string][]byte{},
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
	s.URL = fakeplatform.Serve(t, mux, &s.Link)
	return s
}

// AddResource makes a message's image or file downloadable.
func (s *Server) AddResource(messageID, key string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resources[messageID+"/"+key] = data
}

// Served is how many bytes of a resource the server has written to
// clients: a client that stops reading a download it will not keep makes
// the writes fail early.
func (s *Server) Served(messageID, key string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served[messageID+"/"+key]
}

// Content returns the current content of a message the bot sent (after
// its updates), or "" for an unknown or deleted id.
func (s *Server) Content(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.contents[id]
}
