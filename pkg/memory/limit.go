package memory

import (
	"fmt"

	"github.com/nats-io/nats.go"
)

// headerRoom is what the headers of a write take besides its data (the
// expected last sequence, and for a history entry its message id and the
// subject the sequence is expected on): a few hundred bytes, with room.
const headerRoom = 4 << 10

// fits reports, as an error wrapping ErrTooLarge that names both figures,
// whether size bytes of data leave room for a write's headers within what
// both the server (max payload) and the asset (maxMsgSize, -1 or 0: no
// bound of its own) accept.
func fits(nc *nats.Conn, maxMsgSize int64, what string, size int) error {
	limit := nc.MaxPayload()
	if maxMsgSize > 0 && maxMsgSize < limit {
		limit = maxMsgSize
	}
	if int64(size) > limit-headerRoom {
		return fmt.Errorf("%w: %s is %d bytes, above the %d bytes the bus accepts (%d with its headers)", ErrTooLarge, what, size, limit-headerRoom, limit)
	}
	return nil
}
