package slack

import (
	"errors"

	"github.com/slack-go/slack"

	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// transient are Slack error codes worth retrying.
var transient = map[string]bool{
	"ratelimited": true, "internal_error": true, "fatal_error": true,
	"service_unavailable": true, "request_timeout": true,
}

// classify turns a Web API error into a delivery error (nil stays nil).
func classify(err error) error {
	if err == nil {
		return nil
	}
	var rl *slack.RateLimitedError
	var se slack.SlackErrorResponse
	var sc slack.StatusCodeError
	switch {
	case errors.As(err, &rl):
		return gateway.Retry(err, rl.RetryAfter)
	case errors.As(err, &se):
		if transient[se.Err] {
			return gateway.Retry(err, 0)
		}
		return gateway.Permanent(err)
	case errors.As(err, &sc):
		if sc.Code >= 500 {
			return gateway.Retry(err, 0)
		}
		return gateway.Permanent(err)
	}
	return gateway.Retry(err, 0)
}
