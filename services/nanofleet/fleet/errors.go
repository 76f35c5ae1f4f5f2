package fleet

import (
	"errors"

	"github.com/nanofleet/nanofleet/pkg/storeguard"
)

// ErrNoFleet means a client found NATS but no fleet there.
var ErrNoFleet = errors.New("no fleet")

// ErrUnreachable means a message was not sent: the connection to the
// fleet is down.
var ErrUnreachable = errors.New("the fleet is not reachable; the message was not sent")

// ErrNoReply means a turn ended without a durable reply.
var ErrNoReply = errors.New("turn ended without a reply")

// joinedFull is the reason an all-in-one gave, already "storage full: …".
type joinedFull string

func (e joinedFull) Error() string { return string(e) }
func (e joinedFull) Unwrap() error { return storeguard.ErrFull }
