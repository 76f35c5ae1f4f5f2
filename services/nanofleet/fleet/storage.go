package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nanofleet/nanofleet/pkg/bus"
)

// serveStorage answers requests on the space's storage subject with why
// the store refuses new messages now, empty while it takes them: a CLI
// joined to this fleet asks before it sends, as the gateway asks the
// guard in-process.
func (f *Fleet) serveStorage() error {
	sub, err := f.Bus.NC.Subscribe(f.Bus.Space.StorageState(), func(m *nats.Msg) {
		var reason string
		if err := f.storageErr(); err != nil {
			reason = err.Error()
		}
		_ = m.Respond([]byte(reason))
	})
	if err != nil {
		return fmt.Errorf("fleet: serve the store's state: %w", err)
	}
	f.closer = append(f.closer, func() { _ = sub.Unsubscribe() })
	return nil
}

// storageAsk bounds the question: an all-in-one answers at once.
const storageAsk = time.Second

// JoinedStorage checks the store of the fleet b is joined to: an error
// matching [storeguard.ErrFull] with the all-in-one's reason while it
// refuses new messages, else nil. It is nil as well when no all-in-one
// answers (services on an external NATS, whose server refuses for itself),
// none answers in time or ctx ends first: not knowing is no reason to
// refuse.
func JoinedStorage(ctx context.Context, b *bus.Bus) error {
	ctx, cancel := context.WithTimeout(ctx, storageAsk)
	defer cancel()
	m, err := b.NC.RequestWithContext(ctx, b.Space.StorageState(), nil)
	if err != nil || len(m.Data) == 0 {
		return nil
	}
	return joinedFull(m.Data)
}
