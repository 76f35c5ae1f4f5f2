package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/metakey"
	"github.com/nanofleet/nanofleet/pkg/observe"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Client talks to the fleet as a channel would: it publishes inbound
// messages and waits for their turns' replies. One client serves many
// concurrent conversations over a single outbound consumer, routing
// replies by the inbound id they answer. The CLI, the tests and the
// benchmark use it.
type Client struct {
	b       *bus.Bus
	channel string
	follow  *bus.Follower
	live    *nats.Subscription
	log     *slog.Logger

	mu      sync.Mutex
	waiters map[string]*Pending
}

// Pending is a sent message whose turn has not ended yet.
type Pending struct {
	c       *Client
	id      string
	replies []*nanofleetv1.OutboundMessage
	done    chan struct{}
	onLive  func(*nanofleetv1.OutboundMessage)
}

// ClientOption changes a Client.
type ClientOption func(*Client)

// WithClientLogger sets the logger that hears of the client's reply
// consumer being lost and made again; the default, and nil, discard.
func WithClientLogger(l *slog.Logger) ClientOption {
	return func(c *Client) { c.log = observe.OrDiscard(l) }
}

// NewClient starts receiving the replies of channel. Replies published
// before it started are not seen.
func NewClient(ctx context.Context, b *bus.Bus, channel string, opts ...ClientOption) (*Client, error) {
	c := &Client{b: b, channel: channel, waiters: map[string]*Pending{}, log: observe.OrDiscard(nil)}
	for _, o := range opts {
		o(c)
	}
	occ, err := b.FromNow(ctx, b.Space.OutboundStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{b.Space.OutboundChannel(channel)},
	})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	// Followed closely: a reply must not wait 10 s or more after the
	// node holding the consumer, or the client's own, shuts down.
	c.follow, err = b.Follow(ctx, b.Space.OutboundStream(), occ, c.onReply, c.log)
	if err != nil {
		return nil, fmt.Errorf("client: outbound consumer: %w", err)
	}
	c.live, err = b.NC.Subscribe(b.Space.LiveChannel(channel), c.onLiveMsg)
	if err != nil {
		c.follow.Stop(ctx)
		return nil, fmt.Errorf("client: live: %w", err)
	}
	return c, nil
}

// Close stops receiving and deletes the reply consumer (see
// [bus.Follower.Stop]); one not deleted goes clientInactive after. Left
// to the server, `nanofleet status` right after a CLI command listed that
// command's consumer among the fleet's.
func (c *Client) Close() {
	c.follow.Stop(context.Background())
	_ = c.live.Unsubscribe()
}

func (c *Client) onReply(m jetstream.Msg) {
	out := &nanofleetv1.OutboundMessage{}
	if proto.Unmarshal(m.Data(), out) != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.waiters[out.GetReplyTo()]
	if w == nil {
		return
	}
	w.replies = append(w.replies, out)
	if out.GetLastOfTurn() {
		delete(c.waiters, out.GetReplyTo())
		close(w.done)
	}
}

func (c *Client) onLiveMsg(m *nats.Msg) {
	out := &nanofleetv1.OutboundMessage{}
	if proto.Unmarshal(m.Data, out) != nil {
		return
	}
	c.mu.Lock()
	w := c.waiters[out.GetReplyTo()]
	c.mu.Unlock()
	if w != nil && w.onLive != nil {
		w.onLive(out)
	}
}

// Request is one message to the fleet.
type Request struct {
	ChatID string
	// SessionKey overrides "<channel>:<chat>".
	SessionKey string
	Text       string
	// ID is the inbound id; a new unique one when empty.
	ID string
	// Stream asks for answer deltas on the live subject.
	Stream bool
	// OnLive receives progress, tool hints and deltas.
	OnLive func(*nanofleetv1.OutboundMessage)
}

// Ask publishes req and returns the durable replies of its turn, the last
// one last.
func (c *Client) Ask(ctx context.Context, req Request) ([]*nanofleetv1.OutboundMessage, error) {
	p, err := c.Send(ctx, req)
	if err != nil {
		return nil, err
	}
	return p.Wait(ctx)
}

// Send publishes req without waiting for its turn.
func (c *Client) Send(ctx context.Context, req Request) (*Pending, error) {
	id := req.ID
	if id == "" {
		id = nuid.Next()
	}
	in := &nanofleetv1.InboundMessage{
		Id: id, Channel: c.channel, ChatId: req.ChatID, SenderId: "cli",
		// A terminal in another encoding hands over bytes that are not
		// UTF-8, which protobuf refuses; the model reads U+FFFD instead.
		Content:    strings.ToValidUTF8(req.Text, "\uFFFD"),
		SessionKey: req.SessionKey, Kind: nanofleetv1.InboundKind_INBOUND_KIND_USER, ReceivedAt: timestamppb.Now(),
	}
	if req.Stream {
		in.Metadata = map[string]string{metakey.Stream: "true"}
	}
	data, err := proto.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encode the message: %w", err)
	}
	p := &Pending{c: c, id: id, done: make(chan struct{}), onLive: req.OnLive}
	c.mu.Lock()
	c.waiters[id] = p
	c.mu.Unlock()
	m := nats.NewMsg(c.b.Space.Inbound(c.channel, req.ChatID))
	m.Data = data
	m.Header.Set(nats.MsgIdHdr, c.channel+":"+id)
	// Bounded: ctx is a whole turn's (the CLI waits 15 minutes), and a
	// publish lost with a server that died is never acked; a stream
	// electing a leader (a node died) is waited for.
	if _, err := bus.PublishMsg(ctx, c.b.JS, m); err != nil {
		c.forget(id)
		if !c.b.NC.IsConnected() || errors.Is(err, nats.ErrReconnectBufExceeded) {
			return nil, fmt.Errorf("%w (%v)", ErrUnreachable, err)
		}
		return nil, fmt.Errorf("publish: %w", err)
	}
	return p, nil
}

// ID is the inbound message id.
func (p *Pending) ID() string { return p.id }

// Wait returns the durable replies of the turn, the last one last.
func (p *Pending) Wait(ctx context.Context) ([]*nanofleetv1.OutboundMessage, error) {
	select {
	case <-p.done:
		return p.replies, nil
	case <-ctx.Done():
		p.c.forget(p.id)
		return nil, ctx.Err()
	}
}

func (c *Client) forget(id string) {
	c.mu.Lock()
	delete(c.waiters, id)
	c.mu.Unlock()
}

// Final returns the last reply of a turn: its final answer, its error, or
// the last message the message tool sent.
func Final(replies []*nanofleetv1.OutboundMessage) (*nanofleetv1.OutboundMessage, error) {
	if len(replies) == 0 {
		return nil, ErrNoReply
	}
	return replies[len(replies)-1], nil
}
