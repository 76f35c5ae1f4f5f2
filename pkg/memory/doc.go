// Package memory is the fleet's long-term memory: per-scope MEMORY.md
// documents, a searchable history log, identity links that join one
// person's ids across channels, the revisions Dream and restores leave,
// and the worker side of consolidation ([Store]: the memory text of a
// prompt, and the requests that ask a memory-consolidator to condense old
// turns).
//
// # Scopes
//
// A scope is whose memory it is. "agent" (nanobot's behaviour) shares one
// memory among every conversation of an agent; "user" gives each person
// their own, following the sender across channels through the identity
// links; "session" gives each conversation its own. In user scope a
// group chat (metadata chat_type group/supergroup/channel, channel_type
// channel/group/mpim, or is_group=true) uses Config.GroupScope instead,
// so personal memory never reaches a group and group talk never lands in
// personal memory. A turn's prompt only ever holds its own scope's memory.
//
// # Where things live
//
//   - MEMORY.md of a scope: the key "doc.<scope key>" of the memory KV
//     bucket, a [nanofleetv1.MemoryDoc] that also carries the newest history
//     entries (for the prompt) and markers of applied consolidations.
//     Every write is a compare-and-set on the entry revision.
//   - History log: stream <PREFIX>_MEMLOG, subject
//     <prefix>.memory.log.<scope key>.<session token>, one
//     [nanofleetv1.HistoryEntry] per consolidated range of turns.
//   - Revisions: stream <PREFIX>_MEMREV, subject <prefix>.memory.rev.<scope
//     key>; the stream sequence is the revision number.
//   - Identity links: keys "link.<channel>.<sender>" of the memory bucket.
//   - System jobs (Dream): stream <PREFIX>_MEMJOBS with message schedules.
//
// # Guarantees
//
// A range of turns is consolidated exactly once, whatever retries, crashes
// or competing consolidators happen, because every step is conditional:
//
//  1. History entry: appended with the session's newest entry (on any
//     scope's subject) as expected last sequence, and a deterministic
//     Nats-Msg-Id "<session>:<from>-<to>". A second writer of the same
//     range fails the check, re-reads and finds the entry there.
//  2. MEMORY.md: a compare-and-set on the document's revision, carrying an
//     applied marker for the session's range; a retry that finds its
//     marker does not apply the update again, and an update computed from
//     a memory that changed meanwhile is recomputed, never blindly written.
//  3. Cursor: the session's SessionInfo.consolidated_seq, updated by
//     compare-and-set and only ever moved forward. A request whose range is
//     below the cursor is done.
//
// The consolidator logs an entry whose range starts right after the
// cursor, so after a crash between steps the next attempt finds an entry
// beyond the cursor and finishes steps 2 and 3 for it before anything
// else. If the model fails, the raw messages are the entry: a turn is
// never lost.
package memory
