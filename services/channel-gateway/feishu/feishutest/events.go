package feishutest

import (
	"encoding/json"
	"strconv"
	"time"
)

// Mention is someone mentioned in a message.
type Mention struct {
	Key, OpenID, Name string
}

// BotMention mentions the bot as @_user_1.
var BotMention = Mention{Key: "@_user_1", OpenID: BotOpenID, Name: "nano"}

// Message is an im.message.receive_v1 event with a message of msgType
// and content (encoded as the platform does, a JSON string).
func Message(eventID, sender, chat, chatType, messageID, msgType string, content any, mentions ...Mention) map[string]any {
	c, _ := json.Marshal(content)
	var ms []map[string]any
	for _, m := range mentions {
		ms = append(ms, map[string]any{
			"key": m.Key, "name": m.Name, "tenant_key": "tk",
			"id": map[string]any{"open_id": m.OpenID, "union_id": "on_" + m.OpenID, "user_id": ""},
		})
	}
	return map[string]any{
		"schema": "2.0",
		"header": map[string]any{
			"event_id": eventID, "event_type": "im.message.receive_v1", "app_id": AppID,
			"tenant_key": "tk", "create_time": strconv.FormatInt(time.Now().UnixMilli(), 10), "token": "",
		},
		"event": map[string]any{
			"sender": map[string]any{
				"sender_id":   map[string]any{"open_id": sender, "union_id": "on_" + sender, "user_id": "u_" + sender},
				"sender_type": "user", "tenant_key": "tk",
			},
			"message": map[string]any{
				"message_id": messageID, "chat_id": chat, "chat_type": chatType, "message_type": msgType,
				"content": string(c), "mentions": ms, "create_time": strconv.FormatInt(time.Now().UnixMilli(), 10),
			},
		},
	}
}

// Text is a text message event.
func Text(eventID, sender, chat, chatType, messageID, text string, mentions ...Mention) map[string]any {
	return Message(eventID, sender, chat, chatType, messageID, "text", map[string]string{"text": text}, mentions...)
}
