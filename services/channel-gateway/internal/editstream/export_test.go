package editstream

import "slices"

// LiveTurns is the reply-to ids of the turns streaming on this gateway
// (a delta seen, no final answer yet), sorted: a test that has seen the
// stream of a later delta start knows every delta before it was handled.
func (s *Streams) LiveTurns() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, st := range s.live {
		ids = append(ids, st.first.GetReplyTo())
	}
	slices.Sort(ids)
	return ids
}
