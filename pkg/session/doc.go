// Package session keeps conversations in JetStream so that any worker can
// run any session's next turn.
//
// A session's history is the subject <prefix>.hist.<token> of the history
// stream: one [nanofleetv1.TurnRecord] per completed turn, appended with an
// expected-last-subject-sequence check so two writers can never interleave.
// Metadata (model override, consolidation cursor) lives in the sessions KV
// bucket and a turn in progress in the checkpoints bucket, both updated by
// compare-and-set on the entry revision.
package session

// Key returns the session key of a chat, "<channel>:<chat_id>", as nanobot
// names sessions.
func Key(channel, chatID string) string { return channel + ":" + chatID }
