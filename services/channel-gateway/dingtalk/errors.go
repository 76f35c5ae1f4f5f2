package dingtalk

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// errSendTooFast is the webhook's rate-limit errcode (20 messages a
// minute per robot and chat); it names no wait, so the adapter waits
// sendTooFastWait.
const (
	errSendTooFast  = 130101
	sendTooFastWait = 3 * time.Second
)

// apiError is an open API error answer.
type apiError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("dingtalk: HTTP %d, %s: %s", e.Status, e.Code, e.Message)
}

func retryAfter(h http.Header) time.Duration {
	if n, err := strconv.Atoi(h.Get("Retry-After")); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 0
}
