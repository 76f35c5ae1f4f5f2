package fleet_test

import (
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/services/channel-gateway/dingtalk/dingtalktest"
)

// TestDingTalkThroughTheFleet: a robot message over the stream connection
// goes through the real gateway, worker and fake model, and the answer
// reaches the message's session webhook as markdown.
func TestDingTalkThroughTheFleet(t *testing.T) {
	dt := dingtalktest.New(t)
	llm := answering(t, "dingtalk answer to ")
	startChannel(t, llm, "dingtalk", map[string]any{"clientId": dingtalktest.ClientID, "clientSecret": dingtalktest.ClientSecret,
		"apiUrl": dt.URL, "allowFrom": []string{"staff-ada"}})
	dt.WaitConnected(t, 30*time.Second)
	dt.Send(t, dingtalktest.Message{MsgID: "msg-1", StaffID: "staff-ada", ConversationID: "cid-dm", Text: "hello from dingtalk"})
	c := dt.Next(t, 30*time.Second, "webhook", "otosend")
	if _, text := c.Markdown(); c.Kind != "webhook" || c.Str("msgtype") != "markdown" || text != "dingtalk answer to hello from dingtalk" {
		t.Fatalf("reply = %+v", c)
	}
}

// TestDingTalkStreamsIntoACard: with streaming on and a card template,
// the model's 40 chunks over 4s appear in one AI card delivered while the
// model streams, updated at most once per
// streamEditInterval, its last update finalizing exactly the model's
// answer, which is not sent again.
func TestDingTalkStreamsIntoACard(t *testing.T) {
	dt := dingtalktest.New(t)
	llm := newStreamingModel(t)
	f := startWithChannels(t, llm.Server, map[string]any{
		"dingtalk": map[string]any{"enabled": true, "clientId": dingtalktest.ClientID, "clientSecret": dingtalktest.ClientSecret,
			"apiUrl": dt.URL, "allowFrom": []string{"staff-ada"}, "streaming": true, "streamEditInterval": editInterval.Seconds(),
			"cardTemplateId": "tpl.schema"},
		"web": map[string]any{"enabled": false},
		"api": map[string]any{"enabled": false},
	})
	dt.WaitConnected(t, 30*time.Second)
	dt.Send(t, dingtalktest.Message{MsgID: "msg-1", StaffID: "staff-ada", ConversationID: "cid-dm", Text: "stream please"})
	card := dt.Next(t, 30*time.Second, "cardcreate", "webhook", "otosend")
	if card.Kind != "cardcreate" {
		t.Fatalf("%s, want a card", card.Kind)
	}
	data, _ := card.Body["cardData"].(map[string]any)
	params, _ := data["cardParamMap"].(map[string]any)
	content, _ := params["content"].(string)
	checkFirst(t, content, "card")
	// The card may show the whole answer in a full update before the
	// finalizing one, so the stream ends at the finalize, not at the text.
	id, prev := card.Str("outTrackId"), card
	for prev.Body["isFinalize"] != true {
		u := dt.Next(t, 30*time.Second, "cardstream", "cardcreate", "webhook", "otosend")
		switch {
		case u.Kind != "cardstream" || u.Str("outTrackId") != id:
			t.Fatalf("%s during the stream: %v", u.Kind, u.Body)
		case u.At.Sub(prev.At) < editInterval:
			t.Errorf("an update %s after the call before, under streamEditInterval %s", u.At.Sub(prev.At), editInterval)
		}
		prev = u
	}
	if got := dt.Card(id); got != streamedAnswer {
		t.Errorf("finalized card = %q, want the model's answer %q", got, streamedAnswer)
	}
	waitDelivered(t, f.Bus, "dingtalk", 1)
	dt.None(t, "cardcreate", "webhook", "otosend") // the answer once
}
