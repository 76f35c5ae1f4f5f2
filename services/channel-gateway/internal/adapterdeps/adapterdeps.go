// Package adapterdeps is what every chat-platform adapter gets from the
// gateway that builds it, declared once so that the adapters' constructors
// share one shape and channels.Build one value.
package adapterdeps

import (
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

// Deps are what an adapter needs from its surroundings.
type Deps struct {
	Bus  *bus.Bus
	Gate *access.Gate
	// Status writes this gateway's channel status records (nil: none, in
	// tests that do not look).
	Status *status.Reporter
	// SendProgress and SendToolHints are the channels-wide defaults.
	SendProgress, SendToolHints bool
}
