package memory

import (
	"github.com/nanofleet/nanofleet/pkg/subject"
)

// Names are the streams, subjects and keys of a fleet's memory.
type Names struct{ sp subject.Space }

// NamesOf returns the memory naming of a fleet.
func NamesOf(sp subject.Space) Names { return Names{sp: sp} }

// LogStream holds every scope's history entries.
func (n Names) LogStream() string { return n.sp.Bucket("MEMLOG") }

// RevisionStream holds the revisions of Dream, restores and the sync.
func (n Names) RevisionStream() string { return n.sp.Bucket("MEMREV") }

// JobStream holds the system job schedules and their fires.
func (n Names) JobStream() string { return n.sp.Bucket("MEMJOBS") }

// Log is the subject of a session's entries in a scope.
func (n Names) Log(s Scope, sessionKey string) string { return n.sp.MemoryLog(s.Key(), sessionKey) }

// LogScope matches every entry of a scope.
func (n Names) LogScope(s Scope) string { return n.sp.MemoryLogScope(s.Key()) }

// LogSession matches every entry of a session, in any scope.
func (n Names) LogSession(sessionKey string) string { return n.sp.MemoryLogSession(sessionKey) }

// LogAgent matches every entry of an agent's scopes.
func (n Names) LogAgent(agent string) string { return n.sp.MemoryLogAgent(agent) }

// LogAll matches every entry.
func (n Names) LogAll() string { return n.sp.MemoryLogAll() }

// Revision is the subject of a scope's revisions.
func (n Names) Revision(s Scope) string { return n.sp.MemoryRevision(s.Key()) }

// RevisionAll matches every revision.
func (n Names) RevisionAll() string { return n.sp.MemoryRevisionAll() }

// JobSchedule is the subject holding a system job's schedule message.
func (n Names) JobSchedule(job, agent string) string { return n.sp.MemoryJobSchedule(job, agent) }

// JobFire is the subject a system job's schedule fires on.
func (n Names) JobFire(job, agent string) string { return n.sp.MemoryJobFire(job, agent) }

// JobSchedules matches every system job's schedule message.
func (n Names) JobSchedules() string { return n.sp.MemoryJobSchedules() }

// JobAll matches every job subject.
func (n Names) JobAll() string { return n.sp.MemoryJobAll() }

// DocKey is the memory bucket key of a scope's MemoryDoc.
func DocKey(s Scope) string { return "doc." + s.Key() }

// LinkKey is the memory bucket key of an identity link.
func LinkKey(channel, senderID string) string {
	return "link." + subject.Token(channel) + "." + subject.Token(senderID)
}

// DreamCursorKey is the memory bucket key of Dream's cursor for an agent.
func DreamCursorKey(agent string) string { return "dream.cursor." + subject.Token(agent) }
