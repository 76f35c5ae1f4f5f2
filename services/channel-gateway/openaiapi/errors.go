package openaiapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/httpjson"
)

// errBadRequest marks a request the client must fix.
var errBadRequest = errors.New("bad request")

// storageFull answers 507 for a message the fleet has no room for.
func storageFull(w http.ResponseWriter) {
	apiError(w, http.StatusInsufficientStorage, "server_error", "storage_full",
		"Storage full: the fleet has no room to store the message, so it was not received. Try again once space is freed.")
}

// tooLarge answers 413 for a message the fleet refused for its size.
func tooLarge(w http.ResponseWriter, err error) {
	msg := "The message is too large for the fleet to store."
	var tl *gateway.TooLargeError
	if errors.As(err, &tl) {
		msg = fmt.Sprintf("The last user message has %d bytes of text; the fleet accepts at most %d (the model's context window or its storage).", tl.Size, tl.Limit)
	}
	apiError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large", msg)
}

// apiError writes an error in OpenAI's shape.
func apiError(w http.ResponseWriter, code int, typ, errCode, msg string) {
	var c any
	if errCode != "" {
		c = errCode
	}
	httpjson.Write(w, code, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}})
}
