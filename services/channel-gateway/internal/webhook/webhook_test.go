package webhook_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
		{"body cut at MaxBody", true, running, strings.NewReader(strings.Repeat("a", webhook.MaxBody+10)), true, 0, strings.Repeat("a", webhook.MaxBody)},
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
