package media

import (
	"fmt"
	"io"
	"net/http"
)

// LimitBodies returns a transport whose response bodies fail to read
// beyond max bytes, with [ErrTooLarge]; a body announced longer fails at
// once. It is for clients of platform SDKs that read a download whole
// into memory before the [Store]'s limit can apply (whatsmeow, Feishu's
// SDK), where the length a message announces, written by its sender,
// bounds nothing. The read fails rather than the round trip: SDKs retry a
// failed round trip as a network error.
func LimitBodies(base http.RoundTripper, max int64) http.RoundTripper {
	return limitBodies{base: base, max: max}
}

type limitBodies struct {
	base http.RoundTripper
	max  int64
}

func (l limitBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{body: resp.Body, left: l.max, over: resp.ContentLength > l.max, max: l.max}
	return resp, nil
}

// limitedBody fails once more than max bytes came, or at once when the
// announced length is over.
type limitedBody struct {
	body io.ReadCloser
	left int64
	over bool
	max  int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.over {
		return 0, fmt.Errorf("%w: response over %d bytes", ErrTooLarge, b.max)
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.body.Read(p)
	if b.left -= int64(n); b.left < 0 {
		b.over = true
		return 0, fmt.Errorf("%w: response over %d bytes", ErrTooLarge, b.max)
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.body.Close() }
