package dingtalk

import (
	"fmt"
	"net/http"
	"time"

	"github.com/nanofleet/nanofleet/pkg/backoff"
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

// retryAfter is the wait an answer's Retry-After header asks for, 0 when
// it names none.
func retryAfter(h http.Header) time.Duration {
	d, _ := backoff.RetryAfter(h.Get("Retry-After"), time.Now())
	return d
}
