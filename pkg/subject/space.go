package subject

import (
	"fmt"
	"regexp"
	"strings"
)

// DefaultPrefix is the first token of every subject when none is configured.
const DefaultPrefix = "nanofleet"

var prefixSyntax = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// Space is one fleet's naming: several fleets with different prefixes can
// share a NATS account without seeing each other's messages.
type Space struct {
	prefix string
	upper  string
}

// NewSpace returns the naming for prefix, which must be 1-32 letters,
// digits, '-' or '_'.
func NewSpace(prefix string) (Space, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if !prefixSyntax.MatchString(prefix) {
		return Space{}, fmt.Errorf("subject prefix %q: want 1-32 letters, digits, '-' or '_'", prefix)
	}
	return Space{prefix: prefix, upper: strings.ToUpper(strings.ReplaceAll(prefix, "-", "_"))}, nil
}

// MustSpace is [NewSpace] for prefixes known to be valid, as in tests.
func MustSpace(prefix string) Space {
	s, err := NewSpace(prefix)
	if err != nil {
		panic(err)
	}
	return s
}

// Prefix returns the subject prefix.
func (s Space) Prefix() string { return s.prefix }

// Inbound is the subject of inbound messages of one chat.
func (s Space) Inbound(channel, chatID string) string {
	return s.prefix + ".in." + Token(channel) + "." + Token(chatID)
}

// InboundAll matches every inbound subject.
func (s Space) InboundAll() string { return s.prefix + ".in.>" }

// Outbound is the durable subject of replies to one chat.
func (s Space) Outbound(channel, chatID string) string {
	return s.prefix + ".out." + Token(channel) + "." + Token(chatID)
}

// OutboundChannel matches the replies of every chat of one channel.
func (s Space) OutboundChannel(channel string) string {
	return s.prefix + ".out." + Token(channel) + ".>"
}

// OutboundAll matches every outbound subject.
func (s Space) OutboundAll() string { return s.prefix + ".out.>" }

// Live is the core NATS subject of progress, tool hints and deltas of one
// chat: shown if someone is listening, never stored.
func (s Space) Live(channel, chatID string) string {
	return s.prefix + ".live." + Token(channel) + "." + Token(chatID)
}

// LiveChannel matches the live subjects of every chat of one channel.
func (s Space) LiveChannel(channel string) string {
	return s.prefix + ".live." + Token(channel) + ".>"
}

// ParseChat splits an inbound, outbound or live subject into its channel
// and chat id.
func (s Space) ParseChat(subj string) (channel, chatID string, err error) {
	rest, ok := strings.CutPrefix(subj, s.prefix+".")
	parts := strings.Split(rest, ".")
	if !ok || len(parts) != 3 {
		return "", "", fmt.Errorf("%w: subject %q is not <prefix>.<kind>.<channel>.<chat>", ErrBadToken, subj)
	}
	if channel, err = ParseToken(parts[1]); err != nil {
		return "", "", fmt.Errorf("channel of %q: %w", subj, err)
	}
	if chatID, err = ParseToken(parts[2]); err != nil {
		return "", "", fmt.Errorf("chat of %q: %w", subj, err)
	}
	return channel, chatID, nil
}

// History is the subject of one session's turn records.
func (s Space) History(sessionKey string) string {
	return s.prefix + ".hist." + Token(sessionKey)
}

// HistoryAll matches every history subject.
func (s Space) HistoryAll() string { return s.prefix + ".hist.>" }

// DeadLetter is the subject messages from source are dead-lettered on.
func (s Space) DeadLetter(source string) string {
	return s.prefix + ".dlq." + Token(source)
}

// DeadLetterAll matches every dead-letter subject.
func (s Space) DeadLetterAll() string { return s.prefix + ".dlq.>" }

// ToolCall is the request subject of one tool, served by the tool runners
// that have it.
func (s Space) ToolCall(tool string) string { return s.prefix + ".tools.call." + Token(tool) }

// ToolGroup is the subject group of the tool runners' micro endpoints.
func (s Space) ToolGroup() string { return s.prefix + ".tools" }

// ToolCatalog is the subject of the runners' catalog endpoint, in
// [Space.ToolGroup].
func (s Space) ToolCatalog() string { return s.ToolGroup() + ".catalog" }

// Stop is the core NATS subject that cancels a session's running turn.
func (s Space) Stop(sessionKey string) string { return s.prefix + ".ctl.stop." + Token(sessionKey) }

// StorageState is where an all-in-one answers why its store refuses new
// messages now (empty while it takes them), for the CLIs that join it.
func (s Space) StorageState() string { return s.prefix + ".ctl.storage" }

// WhatsAppSend is the core NATS subject on which the gateway holding
// a WhatsApp account's connection sends the replies other gateways hand it.
func (s Space) WhatsAppSend(account string) string {
	return s.prefix + ".whatsapp.send." + Token(account)
}

// StopAll matches every session's stop subject.
func (s Space) StopAll() string { return s.prefix + ".ctl.stop.>" }

// Consolidate is the subject of one session's consolidation requests.
func (s Space) Consolidate(sessionKey string) string {
	return s.prefix + ".memory.consolidate." + Token(sessionKey)
}

// ConsolidateAll matches every consolidation request.
func (s Space) ConsolidateAll() string { return s.prefix + ".memory.consolidate.>" }

// MemoryLog is the subject of a session's memory entries in a scope,
// scopeKey being the scope's three tokens (kind, agent, id).
func (s Space) MemoryLog(scopeKey, sessionKey string) string {
	return s.prefix + ".memory.log." + scopeKey + "." + Token(sessionKey)
}

// MemoryLogScope matches every memory entry of a scope.
func (s Space) MemoryLogScope(scopeKey string) string {
	return s.prefix + ".memory.log." + scopeKey + ".*"
}

// MemoryLogSession matches every memory entry of a session, in any scope.
func (s Space) MemoryLogSession(sessionKey string) string {
	return s.prefix + ".memory.log.*.*.*." + Token(sessionKey)
}

// MemoryLogAgent matches every memory entry of an agent's scopes.
func (s Space) MemoryLogAgent(agent string) string {
	return s.prefix + ".memory.log.*." + Token(agent) + ".>"
}

// MemoryLogAll matches every memory entry.
func (s Space) MemoryLogAll() string { return s.prefix + ".memory.log.>" }

// MemoryRevision is the subject of a scope's memory revisions.
func (s Space) MemoryRevision(scopeKey string) string { return s.prefix + ".memory.rev." + scopeKey }

// MemoryRevisionAll matches every memory revision.
func (s Space) MemoryRevisionAll() string { return s.prefix + ".memory.rev.>" }

// MemoryJobSchedule is the subject holding a memory system job's
// schedule message for an agent.
func (s Space) MemoryJobSchedule(job, agent string) string {
	return s.prefix + ".memory.job.sched." + Token(job) + "." + Token(agent)
}

// MemoryJobSchedules matches every memory system job's schedule message.
func (s Space) MemoryJobSchedules() string { return s.prefix + ".memory.job.sched.>" }

// MemoryJobFire is the subject a memory system job's schedule fires on.
func (s Space) MemoryJobFire(job, agent string) string {
	return s.prefix + ".memory.job.fire." + Token(job) + "." + Token(agent)
}

// MemoryJobAll matches every memory job subject.
func (s Space) MemoryJobAll() string { return s.prefix + ".memory.job.>" }

// ScheduleAll matches every subject of the schedule stream.
func (s Space) ScheduleAll() string { return s.prefix + ".sched.>" }

// ScheduleJob is the subject that holds a session's job id (the job's
// definition, one message per subject).
func (s Space) ScheduleJob(sessionKey, id string) string {
	return s.prefix + ".sched.job." + Token(sessionKey) + "." + id
}

// ScheduleJobs matches the jobs of a session, or of every session when
// sessionKey is empty.
func (s Space) ScheduleJobs(sessionKey string) string {
	if sessionKey == "" {
		return s.prefix + ".sched.job.*.*"
	}
	return s.prefix + ".sched.job." + Token(sessionKey) + ".*"
}

// ScheduleJobsNamed matches the jobs called id, whatever their session.
func (s Space) ScheduleJobsNamed(id string) string { return s.prefix + ".sched.job.*." + id }

// ScheduleFire is the subject a session's job id fires on.
func (s Space) ScheduleFire(sessionKey, id string) string {
	return s.prefix + ".sched.fire." + Token(sessionKey) + "." + id
}

// ScheduleRelayed is the subject that holds the inbound sequence of a
// session's job id's last relayed fire.
func (s Space) ScheduleRelayed(sessionKey, id string) string {
	return s.prefix + ".sched.relayed." + Token(sessionKey) + "." + id
}

// ScheduleFireAll matches every job's fires.
func (s Space) ScheduleFireAll() string { return s.prefix + ".sched.fire.>" }

// Stream and bucket names. JetStream names may not contain '.', so they
// are built from the upper-cased prefix.

// InboundStream holds inbound messages until a worker acks them.
func (s Space) InboundStream() string { return s.upper + "_IN" }

// OutboundStream holds replies for the gateways.
func (s Space) OutboundStream() string { return s.upper + "_OUT" }

// HistoryStream holds every session's turn records.
func (s Space) HistoryStream() string { return s.upper + "_HIST" }

// DeadLetterStream keeps dead letters for operators.
func (s Space) DeadLetterStream() string { return s.upper + "_DLQ" }

// MemoryStream holds consolidation requests until a consolidator acks them.
func (s Space) MemoryStream() string { return s.upper + "_MEMORY" }

// WorkerConsumer is the durable pull consumer all agent workers share.
func (s Space) WorkerConsumer() string { return "workers" }

// GatewayConsumer is the durable outbound consumer of one channel.
func (s Space) GatewayConsumer(channel string) string { return "gw_" + Token(channel) }

// Bucket returns the name of the fleet's KV or object bucket called name
// (e.g. "leases", "sessions").
func (s Space) Bucket(name string) string { return s.upper + "_" + name }

// KVKey is the subject a write to key of the KV bucket named bucket (the
// stream's whole name, [Space.Bucket]) is published on, without a
// JetStream domain or API prefix.
func KVKey(bucket, key string) string { return "$KV." + bucket + "." + key }
