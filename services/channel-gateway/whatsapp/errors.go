package whatsapp

import (
	"errors"
	"fmt"
	"time"

	"go.mau.fi/whatsmeow"

	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// sendError classifies a whatsmeow send error: the recipient forms it
// refuses are permanent, rate limits wait, the rest is retried.
func sendError(err error) error {
	switch {
	case errors.Is(err, whatsmeow.ErrRecipientADJID), errors.Is(err, whatsmeow.ErrUnknownServer), errors.Is(err, whatsmeow.ErrBroadcastListUnsupported):
		return gateway.Permanent(fmt.Errorf("whatsapp: send: %w", err))
	case errors.Is(err, whatsmeow.ErrIQRateOverLimit):
		return gateway.Retry(fmt.Errorf("whatsapp: send: %w", err), 5*time.Second)
	}
	return gateway.Retry(fmt.Errorf("whatsapp: send: %w", err), 0)
}

// ErrLoggedOut means the account unlinked this device (or WhatsApp did):
// it must be linked again with a new QR code.
var ErrLoggedOut = errors.New("whatsapp: logged out; link the account again")
