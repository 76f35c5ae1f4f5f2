package fleet_test

import (
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/dingtalk/dingtalktest"
)

// TestDingTalkThroughTheFleet: a robot message over the stream connection
// goes through the real gateway, worker and fake model, and the answer
// reaches the message's session webhook as markdown.
func TestDingTalkThroughTheFleet(t *testing.T) {
	dt := dingtalktest.New(t)
	llm := llmtest.NewServer(t)
	llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		return llmtest.Text("dingtalk answer to " + r.LastUserText())
	})
	startWithChannels(t, llm, map[string]any{
		"dingtalk": map[string]any{"enabled": true, "clientId": dingtalktest.ClientID, "clientSecret": dingtalktest.ClientSecret,
			"apiUrl": dt.URL, "allowFrom": []string{"staff-ada"}},
		"web": map[string]any{"enabled": false},
		"api": map[string]any{"enabled": false},
	})
	dt.WaitConnected(t, 30*time.Second)
	dt.Send(t, dingtalktest.Message{MsgID: "msg-1", StaffID: "staff-ada", ConversationID: "cid-dm", Text: "hello from dingtalk"})
	c := dt.Next(t, 30*time.Second, "webhook", "otosend")
	if _, text := c.Markdown(); c.Kind != "webhook" || c.Str("msgtype") != "markdown" || text != "dingtalk answer to hello from dingtalk" {
		t.Fatalf("reply = %+v", c)
	}
}

// TestDingTalkStreamsIntoACard: with streaming on and a card template,
// the model's 40 chunks over 4s appear in one AI card delivered within a
// second of the first chunk, updated at most once per
// streamEditInterval, its last update finalizing exactly the model's
// answer, which is not sent again.
func TestDingTalkStreamsIntoACard(t *testing.T) {
	dt := dingtalktest.New(t)
	llm := newStreamingModel(t)
	startWithChannels(t, llm.Server, map[string]any{
		"dingtalk": map[string]any{"enabled": true, "clientId": dingtalktest.ClientID, "clientSecret": dingtalktest.ClientSecret,
			"apiUrl": dt.URL, "allowFrom": []string{"staff-ada"}, "streaming": true, "streamEditInterval": editInterval.Seconds(),
			"cardTemplateId": "tpl.schema"},
		"web": map[string]any{"enabled": false},
		"api": map[string]any{"enabled": false},
	})
	dt.WaitConnected(t, 30*time.Second)
	dt.Send(t, dingtalktest.Message{MsgID: "msg-1", StaffID: "staff-ada", ConversationID: "cid-dm", Text: "stream please"})
	card := dt.Next(t, 30*time.Second, "cardcreate", "webhook", "otosend")
	if late := card.At.Sub(llm.firstChunk()); card.Kind != "cardcreate" || late > time.Second {
		t.Fatalf("%s %s after the first chunk, want a card within 1s", card.Kind, late)
	}
	id, prev := card.Str("outTrackId"), card
	for dt.Card(id) != streamedAnswer {
		u := dt.Next(t, 30*time.Second, "cardstream", "cardcreate", "webhook", "otosend")
		switch {
		case u.Kind != "cardstream" || u.Str("outTrackId") != id:
			t.Fatalf("%s during the stream: %v", u.Kind, u.Body)
		case u.At.Sub(prev.At) < editInterval:
			t.Errorf("an update %s after the call before, under streamEditInterval %s", u.At.Sub(prev.At), editInterval)
		}
		prev = u
	}
	if prev.Body["isFinalize"] != true {
		t.Errorf("last update %v does not finalize the card", prev.Body)
	}
	dt.None(t, time.Second, "cardcreate", "webhook", "otosend") // the answer once
}
