package discord

import (
	"errors"
	"net/http"
	"time"

	"github.com/disgoorg/disgo/rest"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// classify turns a REST error into a delivery error (nil stays nil).
// disgo has already waited out and retried 429s; one that is still there
// is retried after Discord's retry_after.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var de *gateway.DeliveryError
	if errors.As(err, &de) {
		return err
	}
	var re rest.Error
	if errors.As(err, &re) && re.Response != nil {
		switch code := re.Response.StatusCode; {
		case code == http.StatusTooManyRequests:
			after, _ := backoff.RetryAfter(re.Response.Header.Get("Retry-After"), time.Now())
			return gateway.Retry(err, after)
		case code >= 500:
			return gateway.Retry(err, 0)
		default:
			return gateway.Permanent(err)
		}
	}
	return gateway.Retry(err, 0)
}
