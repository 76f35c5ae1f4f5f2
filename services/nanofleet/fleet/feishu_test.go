package fleet_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/services/channel-gateway/feishu/feishutest"
)

// TestFeishuThroughTheFleet: a Feishu message over the long connection
// goes through the real gateway, worker and fake model, and the answer
// reaches the open API as a card replying to the asking message.
func TestFeishuThroughTheFleet(t *testing.T) {
	fs := feishutest.New(t)
	llm := answering(t, "feishu answer to ")
	startChannel(t, llm, "feishu", map[string]any{"appId": feishutest.AppID, "appSecret": feishutest.AppSecret,
		"baseUrl": fs.URL, "allowFrom": []string{"ou_ada"}})
	fs.WaitConnected(t, 30*time.Second)
	fs.Send(t, feishutest.Text("ev-1", "ou_ada", "oc_p2p", "p2p", "om_1", "hello from feishu"))
	c := fs.Next(t, 30*time.Second, "reply")
	card, _ := json.Marshal(c.Content())
	if c.Parent != "om_1" || c.Str("msg_type") != "interactive" || !strings.Contains(string(card), "feishu answer to hello from feishu") {
		t.Fatalf("reply = %+v", c)
	}
}

// TestFeishuStreamsByUpdating: with streaming on, the answer appears in
// one card replying to the asking message, posted while the model streams
// and updated at most once per streamEditInterval, ending
// with exactly the model's answer; with every update refused, the answer
// arrives whole, once.
func TestFeishuStreamsByUpdating(t *testing.T) {
	for _, failing := range []bool{false, true} {
		t.Run("failing="+strconv.FormatBool(failing), func(t *testing.T) {
			fs := feishutest.New(t)
			if failing {
				fs.Fail("patch", refusals(feishutest.Failure{Status: 400, Code: 230001, Msg: "card not updatable"})...)
			}
			llm := newStreamingModel(t)
			f := startChannel(t, llm.Server, "feishu", map[string]any{"appId": feishutest.AppID, "appSecret": feishutest.AppSecret,
				"baseUrl": fs.URL, "allowFrom": []string{"ou_ada"}, "streaming": true, "streamEditInterval": editInterval.Seconds()})
			fs.WaitConnected(t, 30*time.Second)
			fs.Send(t, feishutest.Text("ev-1", "ou_ada", "oc_p2p", "p2p", "om_1", "stream please"))
			c := fs.Next(t, 30*time.Second, "reply")
			checkFirst(t, feishutest.CardText(c.Str("content")), "card")
			if c.Parent != "om_1" || c.Str("msg_type") != "interactive" {
				t.Errorf("streamed card = %+v", c)
			}
			if failing {
				for feishutest.CardText(c.Str("content")) != streamedAnswer {
					c = fs.Next(t, 30*time.Second, "reply", "create")
				}
				waitDelivered(t, f.Bus, "feishu", 1)
				fs.None(t, "reply", "create") // the whole answer once
				return
			}
			updates := followEdits(t, "update", c.At, func() string { return feishutest.CardText(fs.Content(c.ID)) }, func() time.Time {
				u := fs.Next(t, 30*time.Second, "patch", "reply", "create")
				if u.Kind != "patch" || u.Parent != c.ID {
					t.Fatalf("unexpected %s %+v", u.Kind, u)
				}
				return u.At
			})
			if updates < 3 {
				t.Errorf("%d updates over a 4s answer", updates)
			}
		})
	}
}
