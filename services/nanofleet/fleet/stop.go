package fleet

// StopNow is Stop without waiting for running turns: they are cancelled
// and, unacknowledged, resume from their checkpoints at the next start.
func (f *Fleet) StopNow() {
	f.StopTurns()
	f.Stop()
}

// StopTurns makes a stop, begun or to come, cancel the running turns
// instead of letting them finish; they are handed back to JetStream and
// resume from their checkpoints at the next start.
func (f *Fleet) StopTurns() {
	for _, w := range f.workers {
		w.StopTurns()
	}
}

// Stop stops fetching new work, lets running turns finish, and takes the
// parts down in reverse order.
func (f *Fleet) Stop() {
	if f.cancel != nil {
		f.cancel()
	}
	f.wg.Wait()
	f.close()
}

func (f *Fleet) close() {
	for i := len(f.closer) - 1; i >= 0; i-- {
		f.closer[i]()
	}
	f.closer = nil
}
