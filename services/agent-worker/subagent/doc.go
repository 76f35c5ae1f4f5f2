// Package subagent lets an agent delegate a task to a child session that
// any worker of the fleet runs: nanobot's spawn tool, made durable.
//
// # A child is a session
//
// spawn(task, label, wait) publishes an [nanofleetv1.InboundMessage] of
// kind SUBAGENT on the inbound subject of channel [Channel], chat
// "<parent session>:<id>", with session key "subagent:<parent>:<id>". Its
// metadata names the reduced tool set (files, exec, web); the worker
// applies it with [FilterDefinitions]. Children cannot spawn. The child
// id is derived from the parent turn and the arguments, so a parent turn
// resumed after a crash finds the child it already started, or its
// result, instead of starting a second one.
//
// Every child has a record in the KV bucket <PREFIX>_subagents under
// "<parent token>.<id>" while it runs; [Config.MaxPerSession] bounds the
// running records of one parent session.
//
// # Results
//
// The child's final reply goes, like any turn's, to the outbound subject of
// its own chat, <prefix>.out.subagent.<chat token>, which no gateway
// reads. Two readers:
//
//   - With wait, the spawn call reads that subject (from its start, so a
//     reply that came first is not missed) and returns the reply as its
//     result, in the parent's turn. If the wait outlasts
//     [Config.WaitTimeout], the child is switched to announce mode.
//   - Without wait, the announcer — a durable consumer every
//     [Manager.Run] shares, so it survives the parent's worker dying —
//     publishes the result as an InboundMessage of kind SUBAGENT to the
//     origin chat's inbound subject and parent session, with the id
//     "subagent:<child session>:done" (also its Nats-Msg-Id), then deletes
//     the record and acks. The parent agent answers it like nanobot's
//     announcement: the user gets one message per finished child. A
//     redelivered reply finds no record, or is deduplicated by id.
//
// # Stop
//
// The worker publishes a StopRequest on the parent's stop subject when a
// user sends /stop. Every [Manager.Run] is in one queue group on the stop
// subjects; the member that receives it marks the parent's children as
// stopped, publishes a StopRequest for each child session (the worker
// running it cancels the turn) and deletes a child's inbound message that
// no worker has finished yet. A stopped child is never announced. Only
// children spawned by turns of messages before the /stop are stopped
// (the request's before_seq): each delivery of the /stop publishes its
// request again, and one landing late must not stop a child of a later
// turn.
package subagent
