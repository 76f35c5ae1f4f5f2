package discord_test

import (
	"log/slog"
	"testing"
	"time"

	"fmt"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/services/channel-gateway/discord"
	"github.com/nanofleet/nanofleet/services/channel-gateway/discord/discordtest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adaptertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
)

// TestAdapter runs the scenarios every adapter passes.
func TestAdapter(t *testing.T) {
	adaptertest.Run(t, adaptertest.Platform{Limit: discord.Limit, Quotes: adaptertest.QuotesFirst, Group: guildChannel, Allowlist: true, Start: startSuite})
}

// users are the scenarios' users as Discord user ids, and the channels
// of their DMs with the bot.
var users = map[string]struct{ id, dm string }{
	adaptertest.Owner:    {"500000000000000010", "300000000000000010"},
	adaptertest.Stranger: {stranger, "300000000000000066"},
	adaptertest.Alice:    {alice, dmChannel},
}

type suiteFake struct {
	*discordtest.Server
	*adaptertest.Restarter
}

func (f suiteFake) DM(t *testing.T, n int, user, text string) (id, chat string) {
	u := users[user]
	id = fmt.Sprintf("6000000000000000%02d", n)
	f.Send(discordtest.Message{ID: id, ChannelID: u.dm, AuthorID: u.id, Username: user, Content: text})
	return id, u.dm
}

func (f suiteFake) Group(t *testing.T, n int, user, text string, mention bool) {
	m := discordtest.Message{ID: fmt.Sprintf("6000000000000000%02d", n), ChannelID: guildChannel, GuildID: guild, AuthorID: users[user].id, Username: user, Content: text}
	if mention {
		m.Content, m.Mentions = "<@"+botUser+"> "+text, []string{botUser}
	}
	f.Send(m)
}

func (f suiteFake) Next(t *testing.T) adaptertest.Sent {
	t.Helper()
	c := f.Server.Next(t, adaptertest.Wait, create)
	_, quotes := c.Body["message_reference"]
	nonce, _ := c.Body["nonce"].(string)
	return adaptertest.Sent{Chat: c.ChannelID, Text: c.Content(), At: c.At, Refused: c.Status == 429, Quotes: quotes, Key: nonce}
}

func (f suiteFake) RateLimit(t *testing.T, after int) time.Duration {
	f.Pass(create, after)
	f.Fail(create, discordtest.TooManyRequests(time.Second))
	return time.Second
}

func (f suiteFake) Malformed(t *testing.T) ([]string, int) {
	f.Dispatch("MESSAGE_CREATE", []byte(`{"id": "600000000000000001", "content": "no channel or author"}`))
	f.Dispatch("MESSAGE_CREATE", []byte(`"not an object"`))
	f.Dispatch("MESSAGE_CREATE", []byte(`{"id": 5, "channel_id": [], "author": "x"}`))
	return []string{"dropping malformed Discord message"}, 1
}

// startSuite runs the adapter for a scenario.
func startSuite(t *testing.T, b *bus.Bus, common channelconfig.Common, log *slog.Logger) adaptertest.Fake {
	f := suiteFake{Server: discordtest.New(t, token)}
	// The fake keeps the events of a session whose connection is down
	// for its resume, so a new gateway need not be waited for.
	f.Restarter = adaptertest.NewRestarter(func() func() {
		return runAdapter(t, b, f.Server, discord.Config{Common: common}, log)
	})
	f.WaitConnected(t, wait)
	return f
}
