package fleet_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/feishu/feishutest"
)

// TestFeishuThroughTheFleet: a Feishu message over the long connection
// goes through the real gateway, worker and fake model, and the answer
// reaches the open API as a card replying to the asking message.
func TestFeishuThroughTheFleet(t *testing.T) {
	fs := feishutest.New(t)
	llm := llmtest.NewServer(t)
	llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		return llmtest.Text("feishu answer to " + r.LastUserText())
	})
	startWithChannels(t, llm, map[string]any{
		"feishu": map[string]any{"enabled": true, "appId": feishutest.AppID, "appSecret": feishutest.AppSecret,
			"baseUrl": fs.URL, "allowFrom": []string{"ou_ada"}},
		"web": map[string]any{"enabled": false},
		"api": map[string]any{"enabled": false},
	})
	fs.WaitConnected(t, 30*time.Second)
	fs.Send(t, feishutest.Text("ev-1", "ou_ada", "oc_p2p", "p2p", "om_1", "hello from feishu"))
	c := fs.Next(t, 30*time.Second, "reply")
	card, _ := json.Marshal(c.Content())
	if c.Parent != "om_1" || c.Str("msg_type") != "interactive" || !strings.Contains(string(card), "feishu answer to hello from feishu") {
		t.Fatalf("reply = %+v", c)
	}
}
