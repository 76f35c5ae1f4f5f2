package feishu

import (
	"context"
	"errors"

	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// streamer lets [editstream] post and update the card of a streamed
// answer (update_multi cards can be patched).
type streamer struct{ a *Adapter }

func (s streamer) Post(ctx context.Context, msg *nanofleetv1.OutboundMessage, md string) (string, error) {
	id, err := s.a.sendID(ctx, msg, FormatCard, md, "")
	if err == nil && id == "" {
		err = errors.New("feishu: no message id in the answer")
	}
	return id, err
}

func (s streamer) Edit(ctx context.Context, _ *nanofleetv1.OutboundMessage, id, md string, _ bool) error {
	_, content := body(FormatCard, md)
	r, err := s.a.im.Message.Patch(ctx, larkim.NewPatchMessageReqBuilder().MessageId(id).
		Body(larkim.NewPatchMessageReqBodyBuilder().Content(content).Build()).Build())
	if r != nil {
		return classify(r.ApiResp, r.Code, r.Msg, err)
	}
	return classify(nil, 0, "", err)
}

// Delete removes the card of a stream whose final update did not happen,
// so that the answer sent whole is the only one shown (a bot may delete
// the messages it sent).
func (s streamer) Delete(ctx context.Context, _ *nanofleetv1.OutboundMessage, id string) error {
	r, err := s.a.im.Message.Delete(ctx, larkim.NewDeleteMessageReqBuilder().MessageId(id).Build())
	if r != nil {
		return classify(r.ApiResp, r.Code, r.Msg, err)
	}
	return classify(nil, 0, "", err)
}
