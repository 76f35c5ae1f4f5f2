package held

import "errors"

// ErrLost is the cause of a job context cancelled because the lease was
// lost.
var ErrLost = errors.New("held: lease lost")
