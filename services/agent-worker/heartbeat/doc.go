// Package heartbeat is nanobot's heartbeat as a fleet system job: every
// interval (30 minutes by default) the agent reads the active tasks of its
// HEARTBEAT.md, works on them in a dedicated session, and tells the user
// only when something needs attention.
//
// # How it runs
//
//   - [Service.Ensure] stores the job with package schedule: a message
//     schedule firing an InboundMessage of kind HEARTBEAT on channel
//     [Channel], chat <agent>, session "heartbeat:<agent>". Any service may
//     call it at start-up; it changes the job only when the interval
//     changed.
//   - [Service.Prepare], a [schedule.PrepareFunc] for the relay, runs at
//     each fire: it skips the fire when HEARTBEAT.md (from the agent's
//     profile) has no active tasks, trims the session's history to its
//     last [Config.KeepTurns] turns, and writes the tasks into the
//     message. Any worker then runs the turn.
//   - The turn's replies go to <prefix>.out.heartbeat.<agent>, which no
//     gateway reads. [Service.Run], a durable consumer shared by every
//     instance, forwards a reply to the user unless the model answered
//     [OKToken] ("nothing needs attention"): to the configured chat, or
//     else the chat the fleet last replied to. The forwarded message's id
//     is "heartbeat:<reply id>", also its Nats-Msg-Id, so a redelivered
//     reply notifies once.
package heartbeat
