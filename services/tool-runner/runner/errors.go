package runner

import "errors"

// ErrBlobsFull refuses a put that would take the object store past its
// size bound (nats.blobsMaxMB).
var ErrBlobsFull = errors.New("the fleet's object store is full")
