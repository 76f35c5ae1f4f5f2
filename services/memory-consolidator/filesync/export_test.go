package filesync

// Rounds is how many polls Run has made.
func (s *Syncer) Rounds() uint64 { return s.rounds.Load() }
