package telegram

import (
	"errors"
	"fmt"

	tgbot "github.com/go-telegram/bot"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// classify turns a Bot API error into a delivery error (nil stays nil).
func classify(err error) error {
	if err == nil {
		return nil
	}
	var tooMany *tgbot.TooManyRequestsError
	var migrate *tgbot.MigrateError
	switch {
	case errors.As(err, &tooMany):
		return gateway.Retry(err, config.SecondsDuration(tooMany.RetryAfter))
	case errors.As(err, &migrate),
		errors.Is(err, tgbot.ErrorBadRequest),
		errors.Is(err, tgbot.ErrorForbidden),
		errors.Is(err, tgbot.ErrorUnauthorized),
		errors.Is(err, tgbot.ErrorNotFound):
		return gateway.Permanent(err)
	}
	return gateway.Retry(err, 0)
}

// apiError is a Bot API error response.
type apiError struct {
	Code        int
	Description string
	RetryAfter  int
}

func (e *apiError) Error() string {
	return fmt.Sprintf("telegram api %d: %s", e.Code, e.Description)
}
