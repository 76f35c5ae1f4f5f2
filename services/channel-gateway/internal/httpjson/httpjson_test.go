package httpjson_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/httpjson"
)

func TestWrite(t *testing.T) {
	tests := []struct {
		name string
		code int
		v    any
		want string
	}{
		{"object", http.StatusOK, map[string]string{"id": "m1"}, `{"id":"m1"}`},
		{"error", http.StatusTooManyRequests, map[string]any{"error": map[string]string{"message": "slow down"}}, `{"error":{"message":"slow down"}}`},
		{"list", http.StatusOK, []int{1, 2}, `[1,2]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			httpjson.Write(rec, tt.code, tt.v)
			if rec.Code != tt.code {
				t.Errorf("code %d, want %d", rec.Code, tt.code)
			}
			if ct, cc := rec.Header().Get("Content-Type"), rec.Header().Get("Cache-Control"); ct != "application/json" || cc != "no-store" {
				t.Errorf("Content-Type %q, Cache-Control %q", ct, cc)
			}
			if got := strings.TrimSpace(rec.Body.String()); got != tt.want {
				t.Errorf("body %s, want %s", got, tt.want)
			}
		})
	}
}
