package whatsapp

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// routed is the answer to a send passed to the connection's holder.
type routed struct {
	Err        string        `json:"err,omitempty"`
	Retryable  bool          `json:"retryable,omitempty"`
	RetryAfter time.Duration `json:"retryAfter,omitempty"`
}

// notHeldWait is how long a reply waits when no gateway holds the
// connection (one is taking over, or the account is being linked).
const notHeldWait = 2 * time.Second

// forward passes a reply to the gateway holding the connection.
func (a *Adapter) forward(ctx context.Context, msg *nanofleetv1.OutboundMessage) error {
	data, err := proto.Marshal(msg)
	if err != nil {
		return gateway.Permanent(fmt.Errorf("whatsapp: encode reply: %w", err))
	}
	resp, err := a.deps.Bus.NC.RequestWithContext(ctx, a.route, data)
	if err != nil {
		return gateway.Retry(fmt.Errorf("whatsapp: no gateway holds the connection: %w", err), notHeldWait)
	}
	var r routed
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return gateway.Retry(fmt.Errorf("whatsapp: answer of the connection's holder: %w", err), 0)
	}
	if r.Err == "" {
		return nil
	}
	e := fmt.Errorf("whatsapp: via the connection's holder: %s", r.Err)
	if r.Retryable {
		return gateway.Retry(e, r.RetryAfter)
	}
	return gateway.Permanent(e)
}

// serve sends a reply passed by another gateway.
func (a *Adapter) serve(ctx context.Context, c Conn, m *nats.Msg) {
	msg := &nanofleetv1.OutboundMessage{}
	var err error
	if uerr := proto.Unmarshal(m.Data, msg); uerr != nil {
		err = gateway.Permanent(fmt.Errorf("decode reply: %w", uerr))
	} else {
		switch msg.GetKind() {
		case nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS, nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT, nanofleetv1.OutboundKind_OUTBOUND_KIND_DELTA:
			err = a.deliverLive(ctx, c, msg)
		default:
			err = a.deliver(ctx, c, msg)
		}
	}
	var r routed
	if err != nil {
		r.Err = err.Error()
		r.Retryable, r.RetryAfter = gateway.Retryable(err)
	}
	data, _ := json.Marshal(r) // strings, bools and ints always encode
	if err := m.Respond(data); err != nil {
		a.log.Warn("answer a forwarded reply", "err", err)
	}
}
