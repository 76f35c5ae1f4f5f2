// Package webhook is what the adapters that receive a platform's events
// by webhook (Telegram, Feishu) share: handing the inbox of a running
// Run to the HTTP handler, which the gateway serves whether or not Run
// is running.
package webhook

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// MaxBody is how much of a request body is read; platforms' events are
// far smaller.
const MaxBody = 1 << 20

// BodyTimeout is how long a request body may take to arrive: anyone can
// post to a webhook, and Feishu's body is read before its signature can
// be checked, so a body that never ends would hold its request (and
// connection) for good. Platforms send their small events at once.
const BodyTimeout = 10 * time.Second

// MaxReading is how many bytes of request bodies one Receiver reads at
// once, over all its requests. Feishu's body is read before its signature
// can be checked, so without it anyone could make the gateway hold
// [MaxBody] per connection for [BodyTimeout] (300 stalled bodies held
// 349 MB): with it a flood costs [MaxReading], and the requests over it
// are told to come back (503, Retry-After), as platforms do.
const MaxReading = 32 << 20

// Receiver hands webhook requests to the adapter's Run. The zero value
// is ready to use: no Run serving.
type Receiver struct {
	mu  sync.Mutex
	in  gateway.Inbox
	ctx context.Context // Run's, for the work a request starts

	reading atomic.Int64 // bytes set aside for the bodies being read
}

// Serve makes requests publish to in, under ctx (Run's), until ctx ends.
func (r *Receiver) Serve(ctx context.Context, in gateway.Inbox) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.in, r.ctx = in, ctx
}

// Accept reads req's body, at most [MaxBody], and returns it with the
// serving Run's context and inbox. When there is none (no Run, or its
// context ended) it answers 503, when the body announces more than
// [MaxBody] 413, when the bodies being read would exceed [MaxReading]
// 503, when the body cannot be read within [BodyTimeout] 400, and returns
// ok false.
func (r *Receiver) Accept(w http.ResponseWriter, req *http.Request) (ctx context.Context, in gateway.Inbox, body []byte, ok bool) {
	r.mu.Lock()
	in, ctx = r.in, r.ctx
	r.mu.Unlock()
	if in == nil || ctx.Err() != nil {
		http.Error(w, "not running", http.StatusServiceUnavailable)
		return nil, nil, nil, false
	}
	if req.ContentLength > MaxBody {
		http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		return nil, nil, nil, false
	}
	// What the body may take: its announced length, or MaxBody when it
	// comes in chunks.
	size := int64(MaxBody)
	if req.ContentLength >= 0 {
		size = req.ContentLength
	}
	if r.reading.Add(size) > MaxReading {
		r.reading.Add(-size)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return nil, nil, nil, false
	}
	defer r.reading.Add(-size)
	// Not supported by every ResponseWriter (a test's recorder): then the
	// server's own timeouts are all there is.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(BodyTimeout))
	body, err := io.ReadAll(io.LimitReader(req.Body, MaxBody))
	if err != nil {
		http.Error(w, "read error", http.StatusBadRequest)
		return nil, nil, nil, false
	}
	return ctx, in, body, true
}
