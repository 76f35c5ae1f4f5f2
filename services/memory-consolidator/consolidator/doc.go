// Package consolidator is the memory-consolidator's main job: it takes
// consolidation requests from the MEMORY work-queue stream and condenses a
// session's old turns into its scope's long-term memory (MEMORY.md) and a
// history-log entry, through the model.
//
// # Protocol, per request
//
//  1. All consolidators share one durable pull consumer (explicit ack,
//     InProgress while the model works). A request larger than
//     Config.MaxRequestBytes, one that does not decode or names an
//     impossible range, and one delivered more than Config.MaxDeliveries
//     times go to the dead-letter subject "memory" with the reason.
//  2. Per-session lease "memory.consolidate.<session>" in the lease
//     bucket, renewed while the request runs: one consolidator per session
//     at a time. A consolidator that finds the lease held waits for it.
//  3. Under the lease, in rounds until the session's cursor
//     (SessionInfo.consolidated_seq) reaches the request's to_seq: if the
//     session's newest history entry ends beyond the cursor, an attempt
//     stopped after logging it, so its memory update is applied (unless
//     the document's applied marker says it was) and the cursor moved to
//     its end. Otherwise the turns after the cursor, up to
//     Config.ChunkTokens, go to the model, which must call save_memory
//     with {"history_entry", "memory_update"}, checked by the tool's schema
//     (a text answer is read as that JSON object, repaired if malformed); the
//     entry is appended with the session's newest entry as expected last
//     sequence, MEMORY.md is updated by compare-and-set with an applied
//     marker, and the cursor moves forward by compare-and-set.
//  4. Per-document lease "memory.document.<scope key>": a round holds it
//     from reading MEMORY.md, through the model call, to the Put (and
//     while it finishes a logged entry), renewed while held and released
//     right after the Put. Consolidations of one document thus take turns
//     fleet-wide and the model sees the document the round writes: the
//     compare-and-set fails only if the lease was lost or another writer
//     (Dream, the file sync) wrote, and then the model merges the entry's
//     turns into the new content. The session's lease is always taken
//     first and the document's second, never the reverse, so waits never
//     form a cycle. A round waits for the document
//     up to Config.LeaseWait with the request in progress, then the
//     request is put back as for a held session; a document lease lost
//     under a slow model ends the round and the request is retried.
//  5. If the model fails or its answer cannot be repaired, the raw messages
//     are the entry and MEMORY.md stays as it was: a turn is never lost, and
//     the cursor still moves, so the session stays usable.
//
// Every write being conditional, a retry, a redelivery after a crash or a
// second consolidator holding an expired lease commits each entry exactly
// once (see package memory for the guarantees).
package consolidator
