package whatsapp_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adaptertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/whatsapp"
	"github.com/nanofleet/nanofleet/services/channel-gateway/whatsapp/whatsapptest"
)

// TestAdapter runs the scenarios every adapter passes.
func TestAdapter(t *testing.T) {
	adaptertest.Run(t, adaptertest.Platform{Limit: whatsapp.Limit, Group: "1203630001@g.us", Allowlist: true, Disabled: true, Start: startSuite})
}

// users are the scenarios' users as WhatsApp phone numbers.
var users = map[string]string{adaptertest.Owner: "15550999", adaptertest.Stranger: "15550066", adaptertest.Alice: "15550001"}

type suiteFake struct {
	*whatsapptest.Server
	*adaptertest.Restarter
}

func (f suiteFake) DM(t *testing.T, n int, user, text string) (id, chat string) {
	id = fmt.Sprintf("3EB0%02d", n)
	f.Emit(whatsapptest.DM(id, users[user], text))
	return id, users[user] + "@s.whatsapp.net"
}

func (f suiteFake) Group(t *testing.T, n int, user, text string, mention bool) {
	f.Emit(whatsapptest.Group(fmt.Sprintf("3EB0%02d", n), "1203630001", users[user], text, mention))
}

// Next stamps a message with the time it is taken: the fake records no
// time, and it is taken as soon as it is sent.
func (f suiteFake) Next(t *testing.T) adaptertest.Sent {
	t.Helper()
	s := f.Server.Next(t, adaptertest.Wait)
	quotes := s.Msg.GetExtendedTextMessage().GetContextInfo().GetStanzaID() != ""
	return adaptertest.Sent{Chat: s.To.String(), Text: s.Text(), At: time.Now(), Quotes: quotes}
}

// RateLimit fails the next send as over the rate limit, which WhatsApp
// answers without a wait: the adapter waits 5 s.
func (f suiteFake) RateLimit(t *testing.T, after int) time.Duration {
	f.FailSends(append(make([]error, after), whatsmeow.ErrIQRateOverLimit)...)
	return 5 * time.Second
}

func (f suiteFake) Malformed(t *testing.T) ([]string, int) {
	noBody := whatsapptest.DM("3EB0X", "15550001", "x")
	noBody.Message = nil
	f.Emit(noBody)
	f.Emit(whatsapptest.DM("", "15550001", "x"))
	return []string{"dropping malformed WhatsApp message event"}, 2
}

// startSuite runs the adapter for a scenario.
func startSuite(t *testing.T, b *bus.Bus, common channelconfig.Common, log *slog.Logger) adaptertest.Fake {
	f := suiteFake{Server: whatsapptest.New()}
	// The fake keeps events until a device connects, so a new gateway
	// need not be waited for; the device stays linked in JetStream.
	f.Restarter = adaptertest.NewRestarter(func() func() {
		g, _ := runAdapter(t, b, f.Server, whatsapp.Config{Common: common}, log)
		return g.Stop
	})
	f.Scan(t, wait)
	return f
}
