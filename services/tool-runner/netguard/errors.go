package netguard

import (
	"errors"
	"fmt"
	"net/netip"
)

// ErrBlocked is matched by every refusal.
var ErrBlocked = errors.New("address blocked")

// BlockedError is a refused connection.
type BlockedError struct {
	// Host as asked for (a name or an address literal).
	Host string
	// IP is the address that was refused.
	IP netip.Addr
	// Reason names the range, e.g. "loopback".
	Reason string
}

func (e *BlockedError) Error() string {
	what := e.IP.String()
	if e.Host != "" && e.Host != what {
		what = fmt.Sprintf("%s (resolves to %s)", e.Host, e.IP)
	}
	return fmt.Sprintf("connection to %s refused: %s address; web tools may not reach the runner's own host, private networks or cloud metadata services (an operator can allow a range with tools.web.fetch.allowCIDRs)", what, e.Reason)
}

// Is reports whether target is [ErrBlocked].
func (e *BlockedError) Is(target error) bool { return target == ErrBlocked }
