package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/webhook"
)

// failingBody fails on read, as a connection cut mid-body does.
type failingBody struct{}

func (failingBody) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

func TestAccept(t *testing.T) {
	inbox := gateway.InboxFunc(func(context.Context, *nanofleetv1.InboundMessage) error { return nil })
	running := t.Context()
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name     string
		serve    bool
		ctx      context.Context
		body     io.Reader
		wantOK   bool
		wantCode int    // when not ok
		wantBody string // when ok
	}{
		{"no Run", false, nil, strings.NewReader("{}"), false, http.StatusServiceUnavailable, ""},
		{"Run ended", true, ended, strings.NewReader("{}"), false, http.StatusServiceUnavailable, ""},
		{"unreadable body", true, running, failingBody{}, false, http.StatusBadRequest, ""},
		{"served", true, running, strings.NewReader(`{"update_id":1}`), true, 0, `{"update_id":1}`},
		{"announced over MaxBody", true, running, strings.NewReader(strings.Repeat("a", webhook.MaxBody+10)), false, http.StatusRequestEntityTooLarge, ""},
		// Not a strings.Reader: sent in chunks, with no length announced.
		{"chunked body cut at MaxBody", true, running, io.MultiReader(strings.NewReader(strings.Repeat("a", webhook.MaxBody+10))), true, 0, strings.Repeat("a", webhook.MaxBody)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r webhook.Receiver
			if tt.serve {
				r.Serve(tt.ctx, inbox)
			}
			w := httptest.NewRecorder()
			ctx, in, body, ok := r.Accept(w, httptest.NewRequest(http.MethodPost, "/hook", tt.body))
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v (status %d)", ok, tt.wantOK, w.Code)
			}
			if !ok {
				if w.Code != tt.wantCode {
					t.Errorf("status = %d, want %d", w.Code, tt.wantCode)
				}
				return
			}
			if ctx != tt.ctx || in == nil {
				t.Errorf("got ctx %v, inbox %v; want Run's", ctx, in)
			}
			if string(body) != tt.wantBody {
				t.Errorf("body = %d bytes, want %d", len(body), len(tt.wantBody))
			}
		})
	}
}

// TestAcceptEndsASlowBody is an attack: anyone can post to a webhook, and
// Feishu's handler reads the body before it can check the signature. A
// body that starts and never ends must not hold the request for good.
func TestAcceptEndsASlowBody(t *testing.T) {
	var r webhook.Receiver
	r.Serve(t.Context(), gateway.InboxFunc(func(context.Context, *nanofleetv1.InboundMessage) error { return nil }))
	done := make(chan bool, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _, _, ok := r.Accept(w, req)
		done <- ok
	}))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /hook HTTP/1.1\r\nHost: gateway\r\nContent-Length: 100\r\n\r\n{\"update_id\":"); err != nil {
		t.Fatal(err)
	}
	select {
	case ok := <-done:
		if ok {
			t.Error("a body cut short was accepted")
		}
	case <-time.After(webhook.BodyTimeout + 5*time.Second):
		t.Fatalf("the request still reads its body after %s", webhook.BodyTimeout+5*time.Second)
	}
}

// TestAcceptBoundsTheBodiesBeingRead is an attack: bodies that announce
// MaxBody and stall were each held for BodyTimeout (300 of them held
// 349 MB of a gateway). Past MaxReading, requests are told to come back
// (503) until the bodies being read end.
func TestAcceptBoundsTheBodiesBeingRead(t *testing.T) {
	var r webhook.Receiver
	r.Serve(t.Context(), gateway.InboxFunc(func(context.Context, *nanofleetv1.InboundMessage) error { return nil }))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if _, _, _, ok := r.Accept(w, req); ok {
			_, _ = io.WriteString(w, "ok")
		}
	}))
	defer srv.Close()
	post := func() (int, error) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader(`{"update_id":1}`))
		if err != nil {
			return 0, err
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := post(); err != nil || code != http.StatusOK {
		t.Fatalf("before the flood: %d %v", code, err)
	}
	var stalled []net.Conn
	defer func() {
		for _, c := range stalled {
			c.Close()
		}
	}()
	for range webhook.MaxReading / webhook.MaxBody {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		stalled = append(stalled, c)
		if _, err := fmt.Fprintf(c, "POST /hook HTTP/1.1\r\nHost: gateway\r\nContent-Length: %d\r\n\r\n{", webhook.MaxBody); err != nil {
			t.Fatal(err)
		}
	}
	bustest.Eventually(t, webhook.BodyTimeout/2, func() error {
		if code, err := post(); err != nil || code != http.StatusServiceUnavailable {
			return fmt.Errorf("during the flood: %d %v, want 503", code, err)
		}
		return nil
	})
	for _, c := range stalled {
		c.Close()
	}
	stalled = nil
	bustest.Eventually(t, webhook.BodyTimeout/2, func() error {
		if code, err := post(); err != nil || code != http.StatusOK {
			return fmt.Errorf("after the flood: %d %v, want 200", code, err)
		}
		return nil
	})
}
