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
