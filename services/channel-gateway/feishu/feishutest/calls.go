package feishutest

import (
	"encoding/json"
	"net/http"
	"time"
)

// Call is one open API request.
type Call struct {
	// Kind is "create", "reply", "patch" (a card update), "delete",
	// "resource",
	// "image" or "file" (an upload), "token" or "botinfo".
	Kind string
	// Parent is the message replied to (reply), updated (patch), deleted
	// (delete) or read (resource).
	Parent string
	// Query holds the query parameters (receive_id_type, type).
	Query map[string]string
	// Body is the JSON body: receive_id, msg_type, content, uuid; for an
	// upload, the form fields (image_type, or file_type and file_name).
	Body map[string]any
	// Size is the length of a JSON body in bytes, what the platform's
	// limits count, and TooLong is set when the fake refused the call as
	// over them.
	Size    int
	TooLong bool
	// Upload is an upload's file part, and Key the key the fake gave it
	// ("" when it refused it).
	Upload []byte
	Key    string
	// Duplicate is true when the uuid was seen before, so the platform
	// sent nothing.
	Duplicate bool
	// ID is the id of the message a create or reply made.
	ID string
	// At is when the fake received the call.
	At time.Time
}

// Content decodes the call's content field (a JSON string).
func (c Call) Content() map[string]any {
	var v map[string]any
	s, _ := c.Body["content"].(string)
	_ = json.Unmarshal([]byte(s), &v)
	return v
}

// Str returns a body field as a string.
func (c Call) Str(key string) string {
	s, _ := c.Body[key].(string)
	return s
}

// Failure is a scripted error answer.
type Failure struct {
	// Status is the HTTP status (default 400).
	Status int
	// Code and Msg form the body.
	Code int
	Msg  string
	// Reset is the x-ogw-ratelimit-reset header, in seconds.
	Reset int
}

// RateLimited is the gateway's answer to too many requests.
func RateLimited(reset int) Failure {
	return Failure{Status: http.StatusTooManyRequests, Code: 99991400, Msg: "request trigger frequency limit", Reset: reset}
}

// CardText returns the markdown of an interactive card's content JSON,
// or "" when it is not a one-element markdown card.
func CardText(content string) string {
	var card struct {
		Elements []struct {
			Tag     string `json:"tag"`
			Content string `json:"content"`
		} `json:"elements"`
	}
	if json.Unmarshal([]byte(content), &card) != nil || len(card.Elements) != 1 || card.Elements[0].Tag != "markdown" {
		return ""
	}
	return card.Elements[0].Content
}
