// Package chaos holds TestChaos, the fleet's resilience test: a 3-node
// JetStream cluster of nats-server processes (every stream and bucket
// with 3 replicas), agent-worker and tool-runner processes under a steady
// load, and a monkey that SIGKILLs random workers and tool runners,
// restarts them, and kills and restarts NATS nodes. At the end it reads
// the streams themselves and checks that every message got exactly one
// final reply, that each session's replies, history entries and model
// calls kept the order its messages were sent in, and that the history
// holds exactly one TurnRecord per message.
//
// Beside it, on the same kind of cluster, TestTurnOutlivesAFrozenNode
// freezes (SIGSTOP) the node a worker uses just before the worker's
// lease renewal is due: the worker must move to another node and renew
// there in time, and the turn answer with the model called once.
//
// `make test` runs a short version (about half a minute); `make chaos`
// runs the long one (NANOFLEET_CHAOS=long, a few minutes) and prints the
// figures: messages, kills, restarts, lost, duplicated, reordered.
package chaos
