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
//  5. Group commit, per document within a process: a round hands its chunk
//     (with its cursor, expected last entry and job context) to the
//     document's queue. If no round of the process leads the document, it
//     leads: it first waits (holding nothing) until every other round of
//     the process running for the document has queued or ended, so that
//     the rounds a batch served come back together; then it takes the document lease as in 4, drains
//     the queue (its own chunk first, then the oldest waiters, up to
//     Config.BatchMax chunks and three Config.ChunkTokens of turns; never
//     two chunks of one session), reads MEMORY.md once and asks the model
//     once. One chunk is asked exactly as above (save_memory); several go
//     under labels C1, C2, … to save_memories, whose schema asks for one
//     entry per label and one memory_update. Each chunk's entry is appended with its own expected
//     last sequence (a conflict voids that chunk alone, and the others'
//     entries are then merged into memory one by one, so memory learns only
//     from logged entries), and every logged entry is applied in ONE
//     compare-and-set Put (each entry's applied marker and recent entry).
//     The leader releases the lease, hands each waiter its result and the
//     lead to the oldest waiter left. A waiter waits under its own job
//     context: one that ends while queued leaves the queue untouched; one
//     already in a batch is finished by it. If the leader's own job ends
//     mid-batch, its waiters look at their session again (finishing an
//     entry logged but not applied, as in 3). Other processes still take
//     turns on the fleet-wide lease.
//  6. Slots: a request holds one of Config.Slots from its pull until it
//     hands a chunk to a document's queue behind another round; then it
//     gives the slot back and the process pulls another request, so that
//     a batch can reach Config.BatchMax chunks (a request keeping its slot
//     while queued capped a batch at Slots). A slot is never taken back; a
//     round holds instead one of Slots holds of a document (taken before
//     the document's lease) while it reads the document, asks the model
//     and writes, so no more than Slots model calls run at once. At most
//     BatchMax requests per document and Slots × BatchMax in all give
//     their slot back, so a process holds at most Slots × (BatchMax+1)
//     requests unacknowledged (36 at the defaults, within the consumer's
//     MaxAckPending of 1024 for up to 28 processes; beyond, JetStream only
//     holds the rest back until acks come), and the rest stay in the
//     stream for other processes. A request waiting in a queue is still
//     kept in progress (InProgress every AckWait/3) and its session's
//     lease renewed, so it is not redelivered while it waits.
//  7. If the model fails or its answer cannot be repaired (for a batch: an
//     entry missing, doubled or for no label), or is larger than the bus
//     accepts (an entry above the log's max message size, a memory update
//     that makes the document larger than the server's max payload or the
//     bucket's max value size; checked before anything is logged), the raw
//     messages are every chunk's entry and MEMORY.md stays as it was: a
//     turn is never lost, and the cursor still moves, so the session stays
//     usable. A memory the model merges when finishing a logged entry that
//     the bus refuses leaves memory as it was likewise. Only what cannot
//     be stored whatever the model says (the raw entry, or the document
//     with memory kept) fails the request, and it is dead-lettered: no
//     retry could store it.
//  8. Token usage: every model call's prompt + completion tokens are
//     added to the daily usage (package usage) of the user the request
//     names (ConsolidationRequest.payer, the user of the turn that asked),
//     a batch's call split by the size of each chunk. Best effort: a
//     failed add is logged and the consolidation goes on; a request is
//     never retried nor refused for its count.
//
// Every write being conditional, a retry, a redelivery after a crash or a
// second consolidator holding an expired lease commits each entry exactly
// once (see package memory for the guarantees).
package consolidator
