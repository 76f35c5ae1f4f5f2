package llm_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// newRawServer serves h on loopback and returns its URL.
func newRawServer(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}
