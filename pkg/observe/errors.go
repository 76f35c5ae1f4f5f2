package observe

import "errors"

// ErrStarted is returned by [Server.Run] when the server is running or
// has run.
var ErrStarted = errors.New("observe: server already started")
