package worker

import "strconv"

// The ids a turn is known by, all derived from the inbound message's stream
// sequence so that a redelivery of the same message, on any worker, names
// the same turn, the same replies and the same lease owner.

// turnID is a turn's id, "in<seq>" for the inbound message at stream
// sequence seq. It is the TurnRecord's Nats-Msg-Id (as "turn:<id>") and
// the checkpoint's and every reply's TurnId.
func turnID(seq uint64) string {
	return "in" + strconv.FormatUint(seq, 10)
}

// replyID is the id of a turn's n-th durable reply, "in<seq>:<n>" (n from
// 0). It is the reply's Nats-Msg-Id on the outbound stream, so a
// redelivered turn republishing its replies is deduplicated.
func replyID(turn string, n int) string {
	return turn + ":" + strconv.Itoa(n)
}

// leaseOwner is the owner a worker writes into a session's lease,
// "<worker id>/<seq>": naming the message as well as the worker lets a
// worker restarted under its old id take over the lease of the very turn
// it was running.
func leaseOwner(worker string, seq uint64) string {
	return worker + "/" + strconv.FormatUint(seq, 10)
}
