package webchat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/syncbuf"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/webchat"
)

const token = "test-token-123"

// streamed answers with three deltas on the live subject, then the final
// answer.
func streamed(in *nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
	return []*nanofleetv1.OutboundMessage{
		workertest.Live(nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT, "read notes.md"),
		workertest.Live(nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA, "Hello"),
		workertest.Live(nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA, ", "),
		workertest.Live(nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA, "world!"),
		workertest.Final("**Hello, world!** You said: `" + in.GetContent() + "`"),
	}
}

type harness struct {
	srv    *httptest.Server
	bus    *bus.Bus
	worker *workertest.Worker
	// release lets the worker publish its final answer, which it holds
	// back until the test has seen the deltas (as a model takes its time).
	release chan struct{}
}

func start(t *testing.T, cfg webchat.Config, opts ...webchat.Option) *harness {
	t.Helper()
	b := bustest.StartJetStream(t, channels.Assets)
	ctx := t.Context()
	store, err := session.Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := gateway.New(gateway.DefaultConfig(), b, nil)
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	cfg.Enabled, cfg.Token, cfg.SendToolHints = true, token, &yes
	s, err := webchat.New(ctx, cfg, webchat.Deps{Bus: b, Inbox: pub, Sessions: store}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{srv: httptest.NewServer(s), bus: b, release: make(chan struct{})}
	t.Cleanup(h.srv.Close)
	h.worker = workertest.Start(t, b, streamed, workertest.WithHistory(store), workertest.HoldUntil(h.release, 10*time.Second))
	return h
}

// client is logged in with a cookie, as a browser would be.
func (h *harness) client(t *testing.T) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(h.srv.URL + "/?token=" + token)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request.URL.RawQuery != "" || resp.StatusCode != http.StatusOK {
		t.Fatalf("login ended at %s with %d", resp.Request.URL, resp.StatusCode)
	}
	return c
}

// conversation starts a conversation as the user of c and returns its id
// and the URL of its WebSocket.
func (h *harness) conversation(t *testing.T, c *http.Client) (id, ws string) {
	t.Helper()
	resp, err := c.Post(h.srv.URL+"/api/web/conversations", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	conv := decode[struct{ ID string }](t, resp)
	return conv.ID, "ws" + strings.TrimPrefix(h.srv.URL, "http") + "/api/web/conversations/" + conv.ID + "/ws"
}

// send opens the WebSocket at u as the user of c, as the page does, and
// sends text on it; the socket closes when the test ends.
func send(ctx context.Context, t *testing.T, c *http.Client, u, text string) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	if err := wsjson.Write(ctx, ws, map[string]any{"type": "send", "text": text}); err != nil {
		t.Fatal(err)
	}
	return ws
}

// file is a multipart form body holding one file, as the page uploads it,
// and its content type.
func file(name string, data []byte) (contentType string, body *bytes.Buffer) {
	body = &bytes.Buffer{}
	mw := multipart.NewWriter(body)
	fw, _ := mw.CreateFormFile("file", name)
	fw.Write(data)
	mw.Close()
	return mw.FormDataContentType(), body
}

func decode[T any](t *testing.T, resp *http.Response) T {
	t.Helper()
	defer resp.Body.Close()
	var v T
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestAccessNeedsTheToken(t *testing.T) {
	h := start(t, webchat.Config{})
	tests := []struct {
		name   string
		do     func() (*http.Response, error)
		status int
	}{
		{"api without login", func() (*http.Response, error) { return http.Get(h.srv.URL + "/api/web/conversations") }, http.StatusUnauthorized},
		{"wrong token", func() (*http.Response, error) { return http.Get(h.srv.URL + "/?token=nope") }, http.StatusUnauthorized},
		{"bearer token", func() (*http.Response, error) {
			req, _ := http.NewRequest(http.MethodGet, h.srv.URL+"/api/web/conversations", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			return http.DefaultClient.Do(req)
		}, http.StatusOK},
		{"after login", func() (*http.Response, error) { return h.client(t).Get(h.srv.URL + "/api/web/conversations") }, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := tt.do()
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.status)
			}
		})
	}
	resp, _ := http.Get(h.srv.URL + "/")
	body := new(bytes.Buffer)
	body.ReadFrom(resp.Body)
	resp.Body.Close()
	if !strings.Contains(body.String(), `name="token"`) {
		t.Error("the page without login is not the login form")
	}
}

func TestConversationOverWebSocket(t *testing.T) {
	h := start(t, webchat.Config{})
	c := h.client(t)
	conv, u := h.conversation(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// Another site's page cannot use the user's cookie.
	if _, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c, HTTPHeader: http.Header{"Origin": {"https://evil.example"}}}); err == nil {
		t.Error("cross-origin WebSocket accepted")
	}
	ws := send(ctx, t, c, u, "hi")
	var kinds []string
	// The accepted frame's place among the live frames varies; it is
	// written once the conversation is updated, so the list below waits
	// for it as well as for the final.
	for accepted, final := false, false; !accepted || !final; {
		var f struct{ Type, Text, HTML, Reply string }
		if err := wsjson.Read(ctx, ws, &f); err != nil {
			t.Fatalf("read: %v (got %v)", err, kinds)
		}
		if f.Type == "accepted" {
			accepted = true
			continue
		}
		kinds = append(kinds, f.Type)
		if strings.Count(strings.Join(kinds, ","), "delta") == 3 && f.Type == "delta" {
			close(h.release)
		}
		if f.Type == "final" {
			final = true
			if !strings.Contains(f.HTML, "<strong>Hello, world!</strong>") || f.Reply == "" {
				t.Errorf("final = %+v", f)
			}
		}
	}
	if got := strings.Join(kinds, ","); got != "tool_hint,delta,delta,delta,final" {
		t.Errorf("frames = %s", got)
	}
	in := h.worker.Next(t)
	if in.GetChannel() != "web" || in.GetChatId() != conv || in.GetContent() != "hi" || in.GetMetadata()["stream"] != "true" {
		t.Errorf("inbound = %v", in)
	}
	// The history is what a reload shows.
	resp, err := c.Get(h.srv.URL + "/api/web/conversations/" + conv + "/messages")
	if err != nil {
		t.Fatal(err)
	}
	hist := decode[[]struct{ Role, Text, HTML string }](t, resp)
	if len(hist) != 2 || hist[0].Text != "hi" || !strings.Contains(hist[1].HTML, "<strong>") {
		t.Errorf("history = %+v", hist)
	}
	resp, _ = c.Get(h.srv.URL + "/api/web/conversations")
	list := decode[[]struct{ ID, Title string }](t, resp)
	if len(list) != 1 || list[0].Title != "hi" {
		t.Errorf("conversations = %+v", list)
	}
}

func TestUploads(t *testing.T) {
	h := start(t, webchat.Config{MaxUploadBytes: 1024})
	c := h.client(t)
	conv, _ := h.conversation(t, c)
	upload := func(size int) *http.Response {
		ctype, body := file("notes.txt", bytes.Repeat([]byte("a"), size))
		resp, err := c.Post(h.srv.URL+"/api/web/conversations/"+conv+"/files", ctype, body)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	big := upload(4096)
	msg := decode[struct{ Error string }](t, big)
	if big.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(msg.Error, "too large") {
		t.Errorf("oversize upload: %d %q", big.StatusCode, msg.Error)
	}
	ok := upload(100)
	ref := decode[struct{ Object, Name string }](t, ok)
	if ok.StatusCode != http.StatusCreated || ref.Name != "notes.txt" || !strings.HasPrefix(ref.Object, "web/"+conv+"/") {
		t.Errorf("upload: %d %+v", ok.StatusCode, ref)
	}
}

// TestOversizeMessages: a message over the page's limit is refused with a
// frame the page shows, a frame beyond the socket's read limit closes the
// socket (1009, message too big), and neither reaches the fleet: the
// first message the worker gets is the one sent after them.
func TestOversizeMessages(t *testing.T) {
	h := start(t, webchat.Config{})
	c := h.client(t)
	_, u := h.conversation(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	tests := []struct {
		name string
		size int
		// refusal is the error frame's text; "" when the socket closes.
		refusal string
	}{
		{"over the message limit", 70 << 10, "That message is too long."},
		{"over the frame limit", 1 << 20, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c})
			if err != nil {
				t.Fatal(err)
			}
			defer ws.CloseNow()
			var f struct{ Type, Text string }
			err = wsjson.Write(ctx, ws, map[string]any{"type": "send", "text": strings.Repeat("x", tt.size)})
			if err != nil && tt.refusal == "" {
				return // the server closed the socket before the frame was out
			}
			if err == nil {
				err = wsjson.Read(ctx, ws, &f)
			}
			switch {
			case tt.refusal != "" && (err != nil || f.Type != "error" || f.Text != tt.refusal):
				t.Fatalf("frame %+v, %v; want the error %q", f, err, tt.refusal)
			case tt.refusal == "" && websocket.CloseStatus(err) != websocket.StatusMessageTooBig:
				t.Fatalf("frame %+v, %v; want the socket closed as 1009", f, err)
			}
		})
	}
	close(h.release) // the worker answers at once
	send(ctx, t, c, u, "after")
	if in := h.worker.Next(t); in.GetContent() != "after" {
		t.Fatalf("the worker got %.40q first, want \"after\"", in.GetContent())
	}
}

// TestRefusalsAreThrottledInTheLog: a stranger's wrong logins and
// cross-origin posts are refused each time but logged once per interval,
// so that a flood of them is not a flood of log lines (300 wrong logins
// were 300 WARN lines).
func TestRefusalsAreThrottledInTheLog(t *testing.T) {
	var logs syncbuf.Buffer
	h := start(t, webchat.Config{}, webchat.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	c := h.client(t)
	for range 50 {
		resp, err := http.Get(h.srv.URL + "/?token=nope")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong login: status %d", resp.StatusCode)
		}
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/api/web/conversations", nil)
		req.Header.Set("Origin", "https://evil.example")
		if resp, err = c.Do(req); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("cross-origin post: status %d", resp.StatusCode)
		}
	}
	for _, msg := range []string{"web login with a wrong token", "cross-origin request refused"} {
		if n := strings.Count(logs.String(), msg); n != 1 {
			t.Errorf("%q logged %d times for 50 refusals, want once", msg, n)
		}
	}
}
