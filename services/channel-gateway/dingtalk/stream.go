package dingtalk

import (
	"context"
	"crypto/rand"
	"net/http"
	"strings"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// cardKey is the AI card template's markdown variable that holds the
// answer.
const cardKey = "content"

// cards lets [editstream] show a streamed answer in one AI card: created
// and delivered to the chat at the first delta
// (card/instances/createAndDeliver, the robot as sender), then its
// content replaced whole through the card streaming API, the last update
// finalizing it.
type cards struct{ a *Adapter }

func (c cards) Post(ctx context.Context, msg *nanofleetv1.OutboundMessage, md string) (string, error) {
	a := c.a
	id := "nanofleet-" + rand.Text()
	body := map[string]any{
		"cardTemplateId": a.cfg.CardTemplateID,
		"outTrackId":     id,
		"cardData":       map[string]any{"cardParamMap": map[string]string{cardKey: md}},
		"callbackType":   "STREAM",
		"userIdType":     1,
	}
	// A group is addressed by its conversation id, a one-to-one chat by
	// the user's staff id, as the robot send API does.
	if chat := msg.GetChatId(); strings.HasPrefix(chat, "cid") {
		body["openSpaceId"] = "dtv1.card//IM_GROUP." + chat
		body["imGroupOpenSpaceModel"] = map[string]any{"supportForward": true}
		body["imGroupOpenDeliverModel"] = map[string]any{"robotCode": a.cfg.robotCode()}
	} else {
		body["openSpaceId"] = "dtv1.card//IM_ROBOT." + chat
		body["imRobotOpenSpaceModel"] = map[string]any{"supportForward": true}
		body["imRobotOpenDeliverModel"] = map[string]any{"spaceType": "IM_ROBOT", "robotCode": a.cfg.robotCode()}
	}
	var out struct{}
	if err := a.call(ctx, "/v1.0/card/instances/createAndDeliver", body, &out); err != nil {
		return "", err
	}
	return id, nil
}

func (c cards) Edit(ctx context.Context, _ *nanofleetv1.OutboundMessage, id, md string, final bool) error {
	body := map[string]any{
		"outTrackId": id, "guid": rand.Text(), "key": cardKey, "content": md,
		"isFull": true, "isFinalize": final, "isError": false,
	}
	var out struct{}
	return c.a.callMethod(ctx, http.MethodPut, "/v1.0/card/streaming", body, &out)
}

// FinalEditRequired: a card not finalized keeps showing that the answer
// is still being written, even when its text is whole.
func (cards) FinalEditRequired() bool { return true }
