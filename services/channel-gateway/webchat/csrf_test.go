package webchat_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/nanofleet/nanofleet/services/channel-gateway/webchat"
)

// TestCrossOriginRequestsAreRefused: with the login cookie, a
// state-changing request from another site's page is refused; the page's
// own origin, a configured origin and non-browser clients are not.
func TestCrossOriginRequestsAreRefused(t *testing.T) {
	h := start(t, webchat.Config{AllowedOrigins: []string{"https://chat.example.com"}})
	c := h.client(t)
	conv, _ := h.conversation(t, c)
	tests := []struct {
		name, path string
		header     map[string]string
		want       int
	}{
		{"new conversation from another site", "/api/web/conversations", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"new conversation, fetch metadata cross-site", "/api/web/conversations", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"upload from another site", "/api/web/conversations/" + conv + "/files", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"new conversation, same origin", "/api/web/conversations", map[string]string{"Origin": h.srv.URL}, http.StatusCreated},
		{"new conversation, allowed origin", "/api/web/conversations", map[string]string{"Origin": "https://chat.example.com"}, http.StatusCreated},
		{"new conversation, no browser", "/api/web/conversations", nil, http.StatusCreated},
		{"upload, same origin", "/api/web/conversations/" + conv + "/files", map[string]string{"Origin": h.srv.URL, "Sec-Fetch-Site": "same-origin"}, http.StatusCreated},
		{"upload to a conversation that does not exist", "/api/web/conversations/abcdefabcdef/files", map[string]string{"Origin": h.srv.URL}, http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctype, body := "", &bytes.Buffer{}
			if strings.HasSuffix(tt.path, "/files") {
				ctype, body = file("x.txt", []byte("x"))
			}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, h.srv.URL+tt.path, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", ctype)
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			msg := decode[struct{ Error string }](t, resp)
			if resp.StatusCode != tt.want {
				t.Errorf("status %d (%q), want %d", resp.StatusCode, msg.Error, tt.want)
			}
		})
	}
}

func TestWebSocketOrigins(t *testing.T) {
	h := start(t, webchat.Config{AllowedOrigins: []string{"https://chat.example.com"}})
	c := h.client(t)
	_, u := h.conversation(t, c)
	tests := []struct {
		origin string
		ok     bool
	}{{"https://evil.example", false}, {"https://chat.example.com", true}, {h.srv.URL, true}}
	for _, tt := range tests {
		ws, _, err := websocket.Dial(t.Context(), u, &websocket.DialOptions{HTTPClient: c, HTTPHeader: http.Header{"Origin": {tt.origin}}})
		if (err == nil) != tt.ok {
			t.Errorf("Origin %s: dial error %v, want accepted %v", tt.origin, err, tt.ok)
		}
		if ws != nil {
			ws.Close(websocket.StatusNormalClosure, "")
		}
	}
}

func TestBadAllowedOriginFailsAtStart(t *testing.T) {
	err := webchat.Config{AllowedOrigins: []string{"chat.example.com"}}.Validate()
	if err == nil || !strings.Contains(err.Error(), "channels.web.allowedOrigins[0]") {
		t.Fatalf("Validate() = %v, want an error naming channels.web.allowedOrigins[0]", err)
	}
}
