package bus

import (
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrLayout marks a layout that cannot be provisioned as declared.
var ErrLayout = errors.New("jetstream layout")

// ErrDelete, returned by the change given to [Modify] in place of a value,
// deletes the key at the revision read (nothing when there is none).
var ErrDelete = errors.New("delete the key")

// JetStream error codes the fleet treats specially (nats-server's
// errors.json).
const (
	codeAccountResources   jetstream.ErrorCode = 10002 // resource limits exceeded for account
	codeInsufficientRes    jetstream.ErrorCode = 10023 // insufficient resources (server's max store)
	codeMemoryResources    jetstream.ErrorCode = 10028 // insufficient memory resources available
	codeStorageResources   jetstream.ErrorCode = 10047 // insufficient storage resources available
	codeStreamStoreFailed  jetstream.ErrorCode = 10077 // the store refused the message: {err}
	codeMsgExceedsMaxBytes                     = jetstream.JSErrCodeStreamMessageExceedsMaximum
)

// The store's errors for a stream at its limits, as nats-server words them
// (server.ErrMaxBytes and friends; TestStoreLimitErrorsAreTheServers
// checks them): comparing with the server's own values would link the
// whole server into every service.
const (
	errMaxBytes          = "maximum bytes exceeded"
	errMaxMsgs           = "maximum messages exceeded"
	errMaxMsgsPerSubject = "maximum messages per subject exceeded"
)

// StorageFull reports whether err is JetStream refusing a message for lack
// of space: the server's or the account's store limit, or a stream at its
// max bytes or messages (with discard new). Such a failure lasts until
// space is freed, so it is reported to the user at once rather than waited
// out.
func StorageFull(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case codeAccountResources, codeInsufficientRes, codeMemoryResources, codeStorageResources:
		return true
	case codeStreamStoreFailed:
		// The code covers every store failure; the description is the
		// store's error, so compare it with the server's own values.
		switch apiErr.Description {
		case errMaxBytes, errMaxMsgs, errMaxMsgsPerSubject:
			return true
		}
	}
	return false
}

// TooLarge reports whether err is a message refused for its size: above
// the server's max payload or the stream's max message size. Sending the
// same message again can never succeed.
func TooLarge(err error) bool {
	if errors.Is(err, nats.ErrMaxPayload) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == codeMsgExceedsMaxBytes
}
