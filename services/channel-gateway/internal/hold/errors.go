package hold

// Fatal marks an error of work that no retry can fix (credentials
// rejected): [Run] returns it instead of starting over.
type Fatal struct{ Err error }

func (e *Fatal) Error() string { return e.Err.Error() }
func (e *Fatal) Unwrap() error { return e.Err }
