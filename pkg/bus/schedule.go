package bus

import (
	"time"

	"github.com/nats-io/nats.go"
)

// The headers of JetStream's message schedules (ADR-51): the server keeps
// a message with them as a schedule and publishes a fire to its target
// at every time the pattern names.
const (
	HeaderSchedule         = "Nats-Schedule"
	HeaderScheduleTarget   = "Nats-Schedule-Target"
	HeaderScheduleTimeZone = "Nats-Schedule-Time-Zone"
	// HeaderScheduler, on a fire, is the subject of its schedule.
	HeaderScheduler = "Nats-Scheduler"
	// HeaderScheduleNext, on a fire, is when the schedule fires next
	// (RFC 3339), or [ScheduleNextPurge] for a schedule that fired for
	// the last time and is gone.
	HeaderScheduleNext = "Nats-Schedule-Next"
	ScheduleNextPurge  = "purge"
)

// Schedule is what a schedule message says: when (a pattern such as
// "@every 1h", a cron expression or "@at <RFC 3339>", in TimeZone, the
// server's when empty) to publish a fire on Target.
type Schedule struct {
	Pattern, Target, TimeZone string
}

// Msg returns the schedule message on subject, its fires carrying data.
func (s Schedule) Msg(subject string, data []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = data
	m.Header.Set(HeaderSchedule, s.Pattern)
	m.Header.Set(HeaderScheduleTarget, s.Target)
	if s.TimeZone != "" {
		m.Header.Set(HeaderScheduleTimeZone, s.TimeZone)
	}
	return m
}

// ScheduleOf reads the schedule of a stored schedule message's headers;
// its Pattern is empty when they are not a schedule's.
func ScheduleOf(h nats.Header) Schedule {
	return Schedule{Pattern: h.Get(HeaderSchedule), Target: h.Get(HeaderScheduleTarget), TimeZone: h.Get(HeaderScheduleTimeZone)}
}

// NextFire reads, from a fire's headers, when its schedule fires next;
// false when it does not say (a last fire, or not a fire).
func NextFire(h nats.Header) (time.Time, bool) {
	next, err := time.Parse(time.RFC3339Nano, h.Get(HeaderScheduleNext))
	return next, err == nil
}
