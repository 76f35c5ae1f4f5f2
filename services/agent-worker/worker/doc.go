// Package worker is the agent-worker's turn protocol: how a stateless
// worker takes inbound messages from JetStream and turns each into exactly
// one committed turn, in order per session, while other workers do the
// same and any of them may crash.
//
// The protocol, per message:
//
//  1. All workers share one durable pull consumer on the inbound stream
//     (explicit ack, MaxAckPending = the fleet-wide turn limit). A worker
//     fetches only as many messages as it has free turn slots.
//  2. FIFO guard: a message runs only if it is the oldest message still in
//     the stream on its session subject (one the consumer has already
//     acked, which a store that lost its removal kept, does not count and
//     is removed); otherwise it is nak'ed with a delay that grows with its
//     deliveries.
//  3. Lease: the worker creates the session's key in the lease bucket (TTL),
//     renews it and calls InProgress on the message while the turn runs, and
//     aborts the turn if renewal fails. A busy session is not an error: the
//     message waits its turn.
//  4. A checkpoint of the turn is saved after each model and tool step,
//     and when a redelivered message starts; a redelivered message resumes
//     from it. A first delivery has nothing to resume and saves none until
//     its first step, so a turn answered in one model call writes no
//     checkpoint. A message whose turn has started more than MaxAttempts
//     times is dead-lettered with an error reply, so a poison message never
//     loops forever (its first start, if it saved nothing, is not counted:
//     at most MaxAttempts+1 starts).
//  5. Commit: one TurnRecord appended to the session's history with an
//     expected-last-sequence check (the turn id is its Nats-Msg-Id), then
//     the durable replies published with ids "in<inbound seq>:<n>", then the
//     ack. A message redelivered after its turn was committed finds the
//     turn in the history, republishes the same replies (deduplicated by
//     id) and is acked: one final reply per message.
//
// A malformed envelope is dead-lettered at once with the decode error.
//
// The turn id ("in<seq>"), the reply ids ("in<seq>:<n>") and the lease
// owner ("<worker id>/<seq>") are all built in ids.go. The steps live in
// fifo.go, lease.go, checkpoint.go, commit.go and replies.go; turn.go
// drives them, and what a turn has produced so far is the state type
// (state.go), changed only by its methods.
package worker
