// Package directget reads JetStream stream messages with the server's
// direct get API, including the batched form (nats-server >= 2.11: one
// request, many replies ended by a "204 EOB" status) that nats.go has no
// call for. Reading a range this way costs one round trip per page instead
// of creating and deleting a consumer. Streams must allow direct access.
//
// A Reader receives the replies of all its requests on one wildcard
// subscription, as nats.go's request multiplexer does: a subscription per
// request would cost the server a SUB and an UNSUB, and nats.go a 64K-slot
// channel, on every read of a turn.
package directget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nanofleet/nanofleet/pkg/backoff"
)

// Msg is one message read by a direct get.
type Msg struct {
	Seq    uint64
	Header nats.Header
	Data   []byte
}

// DefaultTimeout bounds one request of a Reader, as nats.go bounds its
// JetStream requests.
const DefaultTimeout = 5 * time.Second

// Reader sends direct get requests on one connection. It is safe for
// concurrent use; the zero value is not usable, use NewReader.
type Reader struct {
	nc      *nats.Conn
	timeout time.Duration
	api     string // JetStream API prefix, ending in "."

	mu      sync.Mutex
	sub     *nats.Subscription // nil until the first request
	prefix  string             // inbox prefix, ending in "."
	next    uint64
	waiters map[string]chan *nats.Msg
}

// Option configures a Reader.
type Option func(*Reader)

// WithTimeout bounds each request (a page of a Range) to d instead of
// DefaultTimeout.
func WithTimeout(d time.Duration) Option { return func(r *Reader) { r.timeout = d } }

// WithDomain sends requests to the JetStream of domain (a leaf node's or
// hub's), as jetstream.NewWithDomain does; "" keeps the local one.
func WithDomain(domain string) Option {
	return func(r *Reader) {
		if domain != "" {
			r.api = "$JS." + domain + ".API."
		}
	}
}

// WithAPIPrefix sends requests under prefix (an account import's), as
// jetstream.NewWithAPIPrefix does; "" keeps the default "$JS.API.".
func WithAPIPrefix(prefix string) Option {
	return func(r *Reader) {
		if prefix != "" {
			r.api = strings.TrimSuffix(prefix, ".") + "."
		}
	}
}

// NewReader returns a Reader on nc. It subscribes on its first request.
func NewReader(nc *nats.Conn, opts ...Option) *Reader {
	r := &Reader{nc: nc, timeout: DefaultTimeout, api: "$JS.API.", waiters: map[string]chan *nats.Msg{}}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Range reads the messages matching filter (wildcards allowed) with a
// sequence in [from, to] (to 0: no bound), at most max (0: no bound),
// oldest first, using the server's batched direct get (one request per
// page; the stream needs AllowDirect).
func (r *Reader) Range(ctx context.Context, stream, filter string, from, to uint64, max int) ([]Msg, error) {
	var out []Msg
	err := r.Scan(ctx, stream, filter, from, to, max, func(m Msg) error {
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Scan is [Reader.Range] handing each message to fn as its page arrives,
// so that a caller that decodes what it reads holds one page of raw
// messages at a time, not the whole range. An error from fn ends the scan
// and is returned as is.
func (r *Reader) Scan(ctx context.Context, stream, filter string, from, to uint64, max int, fn func(Msg) error) error {
	const page = 256
	seen := 0
	for {
		n := page
		if max > 0 && max-seen < n {
			n = max - seen
		}
		req, _ := json.Marshal(struct {
			Seq     uint64 `json:"seq"`
			NextFor string `json:"next_by_subj"`
			Batch   int    `json:"batch"`
		}{from, filter, n})
		got, pending, err := r.request(ctx, stream, req, n)
		if err != nil {
			return fmt.Errorf("read %s: %w", filter, err)
		}
		for _, m := range got {
			if to > 0 && m.Seq > to {
				return nil
			}
			if err := fn(m); err != nil {
				return err
			}
			seen++
			from = m.Seq + 1
		}
		if len(got) == 0 || pending == 0 || (max > 0 && seen >= max) {
			return nil
		}
	}
}

// LastUpTo returns the newest message on subj (a literal subject) with a
// sequence at most upTo (0: the newest), or found false.
func (r *Reader) LastUpTo(ctx context.Context, stream, subj string, upTo uint64) (Msg, bool, error) {
	req, _ := json.Marshal(struct {
		Multi []string `json:"multi_last"`
		UpTo  uint64   `json:"up_to_seq,omitempty"`
		Batch int      `json:"batch"`
	}{[]string{subj}, upTo, 1})
	got, _, err := r.request(ctx, stream, req, 1)
	if err != nil {
		return Msg{}, false, fmt.Errorf("read last of %s: %w", subj, err)
	}
	if len(got) == 0 {
		return Msg{}, false, nil
	}
	return got[len(got)-1], true, nil
}

// Next returns the first message on subj (a literal subject) with a
// sequence at least from, and how many more there are after it; found
// false when there is none.
func (r *Reader) Next(ctx context.Context, stream, subj string, from uint64) (m Msg, after uint64, found bool, err error) {
	req, _ := json.Marshal(struct {
		Seq     uint64 `json:"seq"`
		NextFor string `json:"next_by_subj"`
		Batch   int    `json:"batch"`
	}{from, subj, 1})
	got, pending, err := r.request(ctx, stream, req, 1)
	if err != nil {
		return Msg{}, 0, false, fmt.Errorf("read %s from %d: %w", subj, from, err)
	}
	if len(got) == 0 {
		return Msg{}, 0, false, nil
	}
	return got[0], pending, true, nil
}

// Last returns the newest message matching filter (wildcards allowed).
func (r *Reader) Last(ctx context.Context, stream, filter string) (Msg, bool, error) {
	req, _ := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{filter})
	got, _, err := r.request(ctx, stream, req, 1)
	if err != nil {
		return Msg{}, false, fmt.Errorf("read last of %s: %w", filter, err)
	}
	if len(got) == 0 {
		return Msg{}, false, nil
	}
	return got[0], true, nil
}

// tryTimeout bounds one sending of a request within the Reader's
// timeout: a request whose answer was lost with the connection (its
// node's graceful restart) is never answered, and is sent again after it
// rather than failing the read. A direct get is answered at once.
const tryTimeout = 2 * time.Second

// request sends one direct get request for at most batch messages and
// reads its replies: one message, or a batch ended by a "204 EOB" status,
// or "404" for none. It waits at most the Reader's timeout, whatever ctx
// allows: a server answers a direct get at once, and a request lost with a
// server that died must fail, not hold its caller (a turn lives for
// minutes) until ctx ends. Within it, a request unanswered for
// [tryTimeout] is sent again at once: reading is safe to repeat.
func (r *Reader) request(ctx context.Context, stream string, req []byte, batch int) ([]Msg, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var (
		out     []Msg
		pending uint64
	)
	resend := backoff.Retry{Try: min(tryTimeout, r.timeout), Again: unanswered}
	err := resend.Do(ctx, func(ctx context.Context) (err error) {
		out, pending, err = r.send(ctx, stream, req, batch)
		return err
	})
	if unanswered(err) {
		return nil, 0, fmt.Errorf("direct get from %s: %w", stream, nats.ErrTimeout)
	}
	return out, pending, err
}

// errTryTimeout: one sending of a request went unanswered in its time.
var errTryTimeout = errors.New("unanswered")

func unanswered(err error) bool { return errors.Is(err, errTryTimeout) }

// send is one sending of request; see [Reader.request].
func (r *Reader) send(ctx context.Context, stream string, req []byte, batch int) ([]Msg, uint64, error) {
	// Room for every message of the batch and its end marker: the
	// subscription's dispatcher never blocks on a slow reader.
	ch := make(chan *nats.Msg, batch+1)
	inbox, err := r.wait(ch)
	if err != nil {
		return nil, 0, err
	}
	defer r.forget(inbox)
	if err := r.nc.PublishRequest(r.api+"DIRECT.GET."+stream, inbox, req); err != nil {
		return nil, 0, err
	}
	var out []Msg
	for {
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, 0, errTryTimeout
			}
			return nil, 0, ctx.Err()
		}
		switch status := m.Header.Get("Status"); status {
		case "":
		case "204": // end of batch
			pending, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			return out, pending, nil
		case "404":
			return out, 0, nil
		case "503":
			return nil, 0, nats.ErrNoResponders
		default:
			return nil, 0, fmt.Errorf("status %s %s", status, m.Header.Get("Description"))
		}
		seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("bad Nats-Sequence %q", m.Header.Get("Nats-Sequence"))
		}
		out = append(out, Msg{Seq: seq, Header: m.Header, Data: m.Data})
		if m.Header.Get("Nats-Num-Pending") == "" && m.Header.Get("Nats-Last-Sequence") == "" {
			// A single-message reply: no end-of-batch marker follows.
			return out, 0, nil
		}
	}
}

// wait registers ch for the replies to a new inbox and returns the inbox.
func (r *Reader) wait(ch chan *nats.Msg) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sub == nil {
		r.prefix = r.nc.NewRespInbox() + "."
		sub, err := r.nc.Subscribe(r.prefix+"*", r.dispatch)
		if err != nil {
			return "", fmt.Errorf("subscribe direct get replies: %w", err)
		}
		r.sub = sub
	}
	r.next++
	inbox := r.prefix + strconv.FormatUint(r.next, 36)
	r.waiters[inbox] = ch
	return inbox, nil
}

func (r *Reader) forget(inbox string) {
	r.mu.Lock()
	delete(r.waiters, inbox)
	r.mu.Unlock()
}

// dispatch hands a reply to its request; replies of a request that gave
// up are dropped.
func (r *Reader) dispatch(m *nats.Msg) {
	r.mu.Lock()
	ch := r.waiters[m.Subject]
	r.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- m:
	default: // more replies than the batch asked for: the request fails by its deadline
	}
}
