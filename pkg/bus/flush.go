package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// Flush waits until the server has processed everything sent on nc so
// far (a subscription, before anything that could answer it is
// published), within ctx. nats.go fails every flush under way when the
// connection is lost, with nats.ErrConnectionClosed, though the
// connection reconnects by itself and sends its subscriptions again:
// Flush reports that as nats.ErrConnectionReconnecting, which is
// [Transient], so that the caller flushes again once reconnected. A
// connection that is closed for good still fails with
// nats.ErrConnectionClosed.
func Flush(ctx context.Context, nc *nats.Conn) error {
	err := nc.FlushWithContext(ctx)
	if errors.Is(err, nats.ErrConnectionClosed) && !nc.IsClosed() {
		return fmt.Errorf("flush cut short by a lost connection: %w", nats.ErrConnectionReconnecting)
	}
	return err
}
