package watch

import "errors"

// ErrRunning is returned by a second call of [Watcher.Run].
var ErrRunning = errors.New("watch: already running")
