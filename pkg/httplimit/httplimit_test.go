package httplimit_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/httplimit"
)

var errTooLarge = errors.New("too large")

// TestTransport: a sender announces a small file and the host sends a
// large or endless one; the client must stop reading at the limit,
// whatever length was announced, and a body of exactly the limit reads
// whole. (The channel gateway's media TestLimitBodies and the llm
// package's TestCappedBodyBound, moved here with the code.)
func TestTransport(t *testing.T) {
	const limit = 1000
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if r.URL.Query().Get("announce") == "yes" {
			w.Header().Set("Content-Length", strconv.Itoa(n))
		}
		chunk := []byte(strings.Repeat("x", 512))
		for sent := 0; n < 0 || sent < n; sent += len(chunk) {
			if n >= 0 && n-sent < len(chunk) {
				chunk = chunk[:n-sent]
			}
			if _, err := w.Write(chunk); err != nil {
				return // the client stopped reading
			}
		}
	}))
	defer srv.Close()
	c := &http.Client{Transport: httplimit.Transport(http.DefaultTransport.(*http.Transport).Clone(), limit, errTooLarge)}
	tests := []struct {
		name     string
		query    string
		wantSize int
		wantErr  error
	}{
		{"under the limit", "n=999&announce=yes", 999, nil},
		{"at the limit, not announced", "n=1000", 1000, nil},
		{"one byte over the limit, not announced", "n=1001", 0, errTooLarge},
		{"empty", "n=0&announce=yes", 0, nil},
		{"announced over the limit", "n=5000&announce=yes", 0, errTooLarge},
		{"over the limit, not announced", "n=5000", 0, errTooLarge},
		{"endless", "n=-1", 0, errTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/?"+tt.query, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("read %d bytes, err %v; want %v", len(data), err, tt.wantErr)
			}
			if tt.wantErr == nil && len(data) != tt.wantSize {
				t.Errorf("read %d bytes, want %d", len(data), tt.wantSize)
			}
			if len(data) > limit {
				t.Errorf("read %d bytes, over the limit %d", len(data), limit)
			}
		})
	}
}
