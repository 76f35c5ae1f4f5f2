package adaptertest

import (
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

// Linked is a fake platform the adapter holds one connection to.
type Linked interface {
	Connections
	WaitConnected(t testing.TB, timeout time.Duration)
}

// OneConnection checks that gateways on b share an account's connection
// to fake by its lease: a second gateway waits while the first holds it,
// and takes over when the first stops. run starts a gateway and returns
// what stops it; answered sends message n with text and fails the test
// unless the answer came back once (and, where the platform has no
// idempotency key, is recorded as delivered, so that stopping the
// gateway cannot send it again). The first gateway's status, written
// before the connection is made, says it is connected as account.
func OneConnection(t *testing.T, b *bus.Bus, fake Linked, channel, account string, run func() (stop func()), answered func(t *testing.T, n int, text string)) {
	t.Helper()
	stopFirst := run()
	fake.WaitConnected(t, Wait)
	if rec := Status(t, b, channel); rec.Account != account || rec.State != status.Connected {
		t.Errorf("status = %+v, want connected as %s", rec, account)
	}
	run()
	answered(t, 1, "first")
	if n := fake.Connections(); n != 1 {
		t.Errorf("%d connections for one account, want 1", n)
	}
	stopFirst()
	fake.WaitConnections(t, 2, Wait) // the lease TTL in tests is 3s
	answered(t, 2, "second")
	if n := fake.Connections(); n != 2 {
		t.Errorf("%d connections opened, want 2", n)
	}
}
