// Package httplimit bounds what an HTTP response body may bring. A client
// that reads a body whole (a platform SDK's download, go-openai's
// decoder) holds whatever the server sends, however long: neither the
// length a message announces nor the caller's own limit, applied after
// the read, bounds it.
package httplimit

import (
	"fmt"
	"io"
	"net/http"
)

// Transport returns a transport whose response bodies are bounded by
// [Limit]. The read fails rather than the round trip: clients retry a
// failed round trip as a network error.
func Transport(base http.RoundTripper, max int64, tooLarge error) http.RoundTripper {
	return transport{base: base, max: max, tooLarge: tooLarge}
}

type transport struct {
	base     http.RoundTripper
	max      int64
	tooLarge error
}

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	Limit(resp, t.max, t.tooLarge)
	return resp, nil
}

// Limit bounds resp's body: a read beyond max bytes fails with an error
// wrapping tooLarge, and a body announced longer (Content-Length) fails
// at its first read. For a client that gets its responses from another's
// Do; others take [Transport].
func Limit(resp *http.Response, max int64, tooLarge error) {
	resp.Body = &body{ReadCloser: resp.Body, left: max, over: resp.ContentLength > max, max: max, tooLarge: tooLarge}
}

// body reads one byte more than it may return, as http.MaxBytesReader
// does, to tell a body of exactly the bound from a longer one.
type body struct {
	io.ReadCloser
	left     int64
	over     bool
	max      int64
	tooLarge error
}

func (b *body) Read(p []byte) (int, error) {
	if b.over {
		return 0, b.err()
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	if b.left -= int64(n); b.left < 0 {
		b.over = true
		return 0, b.err()
	}
	return n, err
}

func (b *body) err() error { return fmt.Errorf("%w: response over %d bytes", b.tooLarge, b.max) }
