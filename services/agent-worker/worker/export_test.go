package worker

// MarkAnswered states, for a test, that this worker committed and answered
// the session's turn of inbound sequence seq.
func (w *Worker) MarkAnswered(key string, seq uint64) { w.markAnswered(key, seq) }
