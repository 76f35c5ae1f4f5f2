package feishu

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// errPublish marks a failure to store an event: the platform should send
// it again.
var errPublish = errors.New("feishu: event not stored")

// Platform codes worth another try: rate limits, internal errors and
// token trouble the SDK fixes by fetching a new token.
var (
	rateLimited = map[int]bool{99991400: true, 230020: true, 11232: true}
	transient   = map[int]bool{1500: true, 99991661: true, 99991663: true, 99991664: true}
)

// classify turns an API outcome into nil or a delivery error.
func classify(resp *larkcore.ApiResp, code int, msg string, err error) error {
	if err != nil {
		if resp != nil && resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			return gateway.Permanent(fmt.Errorf("feishu: %w", err))
		}
		return gateway.Retry(fmt.Errorf("feishu: %w", err), retryAfter(resp))
	}
	if code == 0 && (resp == nil || resp.StatusCode < 400) {
		return nil
	}
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	e := fmt.Errorf("feishu: HTTP %d, code %d: %s", status, code, msg)
	switch {
	case rateLimited[code] || status == http.StatusTooManyRequests:
		return gateway.Retry(e, max(retryAfter(resp), time.Second))
	case transient[code] || status >= 500:
		return gateway.Retry(e, 0)
	}
	return gateway.Permanent(e)
}

// retryAfter is the wait the API gateway asks for: its rate-limit reset
// header, else Retry-After.
func retryAfter(resp *larkcore.ApiResp) time.Duration {
	if resp == nil {
		return 0
	}
	for _, h := range []string{"X-Ogw-Ratelimit-Reset", "Retry-After"} {
		if d, ok := backoff.RetryAfter(resp.Header.Get(h), time.Now()); ok && d > 0 {
			return d
		}
	}
	return 0
}
