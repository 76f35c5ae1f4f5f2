// Package schedule keeps the fleet's scheduled jobs — the agent's cron
// tool and system jobs such as the heartbeat — as NATS message schedules
// (ADR-51, nats-server ≥ 2.14). The NATS server is the scheduler: a job
// survives every service restarting, and fires once however many services
// run, with no leader election.
//
// # Layout
//
// One stream, <PREFIX>_SCHED ([StreamName]), subjects <prefix>.sched.>,
// message schedules allowed, one message per subject ([Assets]):
//
//	<prefix>.sched.job.<session token>.<job id>   the schedule
//	<prefix>.sched.fire.<session token>.<job id>  its latest fire
//
// A schedule message carries Nats-Schedule ("@at <RFC 3339 UTC>",
// "@every <duration>", or a 6-field cron expression with
// Nats-Schedule-Time-Zone), Nats-Schedule-Target (the job's fire subject)
// and the job's description in Nanofleet-Job-* headers; its body is the
// [nanofleetv1.InboundMessage] a fire becomes (kind CRON or HEARTBEAT, the
// creating session's channel and chat). At each fire the server stores a
// copy of body and headers on the target subject. A one-time job's fire
// purges its schedule; a removed job's subject is purged by [Scheduler.Remove].
//
// # Fires become turns
//
// The server requires a schedule's target to be a subject of the
// schedule's own stream, so a fire cannot land on the inbound work queue
// directly. Every service may run a [Relay]; all relays share one durable
// consumer on the fire subjects, so each fire is handled by one of them. A
// relay publishes the fire's InboundMessage on the session's inbound
// subject with the id "sched:<session token>:<job id>:<fire unix second>",
// also its Nats-Msg-Id, then acks: a relay that dies between publish and
// ack makes a duplicate the inbound stream drops, so one fire is one turn.
// A fire of a repeating job removed meanwhile is dropped.
//
// Fires are not replayed in bulk: while no relay runs, each job keeps only
// its latest fire, relayed when a relay comes back; the server itself
// skips fire times that passed while it was down.
//
// Cron expressions follow nanobot (5 fields, minute first) or the server
// (6 fields, second first); descriptors such as @daily are accepted. They
// are parsed here with the server's rules, so invalid input is refused
// with a reason before anything is stored and the next fire time shown is
// the one the server will use.
package schedule
