package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/nats-io/nats.go"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/hold"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
	"github.com/nanofleet/nanofleet/services/channel-gateway/whatsapp/kvstore"
)

// Run holds the WhatsApp connection while this gateway holds the fleet's
// lease for the account, until ctx ends.
func (a *Adapter) Run(ctx context.Context, in gateway.Inbox) error {
	return hold.Run(ctx, a.deps.Bus, hold.Key(Channel, a.cfg.account()), a.log, func(ctx context.Context) error {
		return a.connect(ctx, in)
	}, hold.WithStatus(a.deps.Status))
}

// connect loads the device from the fleet, connects it (linking it first
// when new), serves sends for the other gateways, and returns when the
// connection ends.
func (a *Adapter) connect(ctx context.Context, in gateway.Inbox) error {
	dev, err := a.devices.Device(ctx)
	if err != nil {
		return err
	}
	a.setSelf(dev.GetJID(), dev.GetLID())
	// Read before dialing: once dialed, the library sets the id when the
	// phone scans the code, on a goroutine of its own.
	linked := dev.ID
	if linked == nil {
		a.report(ctx, func(r *status.Record) { r.State, r.Reason, r.Account = status.Linking, "waiting for the QR code", "" })
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var told sync.Once
	// Events may come before dial returns (messages kept while offline);
	// they wait until the connection is set, which media downloads and
	// presence need.
	ready := make(chan struct{})
	conn, err := a.dial(ctx, dev, Handlers{
		Event: func(evt any) bool {
			select {
			case <-ready:
				return a.onEvent(ctx, in, evt)
			case <-ctx.Done():
				return false
			}
		},
		QR: func(code string) {
			// A warning, once per connection: the channel cannot work
			// until someone scans a code.
			told.Do(func() {
				a.log.Warn("WhatsApp is not linked: run `nanofleet channels login whatsapp` or open the dashboard, and scan the QR code")
			})
			a.report(ctx, func(r *status.Record) { r.State, r.QR, r.Reason = status.Linking, code, "" })
		},
		Linked: func(id types.JID) {
			a.log.Info("WhatsApp linked", "account", id.User)
			a.setSelf(id, dev.GetLID())
			a.report(ctx, func(r *status.Record) { r.State, r.QR, r.Reason, r.Account = status.Connected, "", "", "+"+id.User })
		},
	})
	if err != nil {
		return err
	}
	if linked != nil {
		a.report(ctx, func(r *status.Record) { r.State, r.QR, r.Reason, r.Account = status.Connected, "", "", "+"+linked.User })
	}
	sub, err := a.deps.Bus.NC.Subscribe(a.route, func(m *nats.Msg) { a.serve(ctx, conn, m) })
	if err != nil {
		return fmt.Errorf("whatsapp: serve sends: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	a.mu.Lock()
	a.conn = conn
	a.mu.Unlock()
	close(ready)
	defer func() {
		a.mu.Lock()
		a.conn = nil
		a.mu.Unlock()
	}()
	select {
	case <-conn.Done():
	case <-ctx.Done():
		<-conn.Done()
	}
	err = conn.Err()
	if errors.Is(err, ErrLoggedOut) {
		// The old keys are worthless; the next connection links anew.
		if derr := a.devices.DeleteDevice(context.WithoutCancel(ctx), dev); derr != nil && !errors.Is(derr, kvstore.ErrNoID) {
			a.log.Warn("forget logged-out device", "err", derr)
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (a *Adapter) setSelf(ids ...types.JID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.self = a.self[:0]
	for _, id := range ids {
		if id.User != "" {
			a.self = append(a.self, id.User)
		}
	}
}

func (a *Adapter) isSelf(id types.JID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return id.User != "" && slices.Contains(a.self, id.User)
}

// report updates the channel's status record; a failure is only logged.
func (a *Adapter) report(ctx context.Context, f func(*status.Record)) {
	if err := a.deps.Status.Update(ctx, Channel, f); err != nil {
		a.log.Warn("report status", "err", err)
	}
}

// onEvent handles one whatsmeow event; false: a message not stored.
func (a *Adapter) onEvent(ctx context.Context, in gateway.Inbox, evt any) bool {
	switch e := evt.(type) {
	case *events.Message:
		return a.onMessage(ctx, in, e)
	case *events.Connected:
		a.log.Info("WhatsApp connected")
	case *events.Disconnected:
		a.log.Warn("WhatsApp disconnected; whatsmeow reconnects")
	}
	return true
}
