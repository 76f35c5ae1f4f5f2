package discord

import (
	"bytes"
	"context"

	"github.com/disgoorg/disgo/discord"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// sendMedia uploads an attachment from the object store.
func (a *Adapter) sendMedia(ctx context.Context, msg *nanofleetv1.OutboundMessage, i int, m *nanofleetv1.MediaRef) error {
	if m.GetObject() == "" {
		if m.GetUrl() == "" {
			return nil
		}
		_, err := a.post(ctx, msg, m.GetUrl(), false, nonce(msg.GetId()+"/media", i), nil)
		return err
	}
	data, err := a.media.Get(ctx, m.GetObject())
	if err != nil {
		return err
	}
	name := m.GetName()
	if name == "" {
		name = "file"
	}
	_, err = a.post(ctx, msg, "", false, nonce(msg.GetId()+"/media", i), []*discord.File{discord.NewFile(name, "", bytes.NewReader(data))})
	return err
}
