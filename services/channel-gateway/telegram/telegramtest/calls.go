package telegramtest

import (
	"strconv"
	"time"
)

// Call is one API request the server received.
type Call struct {
	Method string
	// Fields are the request parameters as strings (JSON values for
	// objects, as Telegram receives them in forms).
	Fields map[string]string
	// Files are uploaded files by field name.
	Files map[string][]byte
	// At is when the server received the call.
	At time.Time
	// MessageID is the message sent or edited, when the call succeeded.
	MessageID int
}

// Failure is a scripted error answer.
type Failure struct {
	Code        int
	Description string
	RetryAfter  int
}

// TooManyRequests is a 429 asking to wait seconds.
func TooManyRequests(seconds int) Failure {
	return Failure{Code: 429, Description: "Too Many Requests: retry after " + strconv.Itoa(seconds), RetryAfter: seconds}
}

// CantParseEntities is Telegram's answer to bad HTML.
func CantParseEntities() Failure {
	return Failure{Code: 400, Description: "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0"}
}
