package observe

import "errors"

// ErrStarted is returned by [Server.Start] when the server is already
// running or has been shut down.
var ErrStarted = errors.New("observe: server already started")
