package discord

import (
	"context"

	"github.com/disgoorg/disgo/rest"
	"github.com/disgoorg/snowflake/v2"
)

// startTyping shows "typing…" in channel until the turn's answer arrives
// (Discord also ends it with the bot's next message, so it is started
// again after progress messages); see internal/typing.
func (a *Adapter) startTyping(channel string) {
	id, err := snowflake.Parse(channel)
	if err != nil {
		return
	}
	a.typing.Start(channel, func(ctx context.Context) error {
		return a.rest.SendTyping(id, rest.WithCtx(ctx))
	})
}
