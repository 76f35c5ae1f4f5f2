package procgroup

import "errors"

// ErrExited is returned by [Proc.WaitPrinted] when the process exits
// before printing what was waited for.
var ErrExited = errors.New("procgroup: process exited")
