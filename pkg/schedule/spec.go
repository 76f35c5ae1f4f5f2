package schedule

import (
	"fmt"
	"strings"
	"time"
)

// Spec says when a job fires: exactly one of At, Every and Cron.
type Spec struct {
	// At is a one-time fire instant.
	At time.Time
	// Every is a repeating interval of whole seconds, at least 1s.
	Every time.Duration
	// Cron is a 5-field (minute first) or 6-field (second first)
	// expression, or a descriptor such as @daily.
	Cron string
	// TZ is the IANA zone Cron is evaluated in (UTC when empty); with At
	// it is only the zone the time is shown in.
	TZ string
}

// Validate checks the spec against now: exactly one kind, a parseable
// expression, a known zone, a future time.
func (s Spec) Validate(now time.Time) error {
	n := 0
	if !s.At.IsZero() {
		n++
	}
	if s.Every != 0 {
		n++
	}
	if s.Cron != "" {
		n++
	}
	if n != 1 {
		return fmt.Errorf("%w: give exactly one of at, every_seconds and cron_expr", ErrInvalidSchedule)
	}
	if _, err := s.location(); err != nil {
		return err
	}
	switch {
	case s.Every != 0:
		if s.TZ != "" {
			return fmt.Errorf("%w: tz applies to cron_expr and at, not to every_seconds", ErrInvalidSchedule)
		}
		if s.Every < time.Second || s.Every%time.Second != 0 {
			return fmt.Errorf("%w: every_seconds must be a whole number of seconds, at least 1 (got %s)", ErrInvalidSchedule, s.Every)
		}
	case s.Cron != "":
		if _, err := parseCron(s.Cron); err != nil {
			return err
		}
	default:
		if !s.At.After(now) {
			return fmt.Errorf("%w: %s is before now (%s)", ErrInPast, s.At.Format(time.RFC3339), now.In(s.At.Location()).Format(time.RFC3339))
		}
	}
	return nil
}

// location loads TZ; nil for none.
func (s Spec) location() (*time.Location, error) {
	if s.TZ == "" {
		return nil, nil
	}
	loc, err := time.LoadLocation(s.TZ)
	if err != nil || s.TZ == "Local" {
		return nil, fmt.Errorf("%w: %q (use an IANA name such as Europe/Berlin or America/New_York)", ErrUnknownTimeZone, s.TZ)
	}
	return loc, nil
}

// headers returns the server's Nats-Schedule pattern and time zone header
// value ("" for none: the server rejects a zone with @at and @every).
func (s Spec) headers() (pattern, tz string, err error) {
	switch {
	case s.Every != 0:
		return "@every " + s.Every.String(), "", nil
	case s.Cron != "":
		full, err := serverCron(s.Cron)
		return full, s.TZ, err
	default:
		return "@at " + s.At.UTC().Format(time.RFC3339), "", nil
	}
}

// nextAfter returns the first fire after t for At and Cron specs; Every
// needs the job's phase (see [Job.Next]).
func (s Spec) nextAfter(t time.Time) (time.Time, bool) {
	switch {
	case !s.At.IsZero():
		return s.At, s.At.After(t)
	case s.Cron != "":
		c, err := parseCron(s.Cron)
		if err != nil {
			return time.Time{}, false
		}
		loc, _ := s.location()
		if loc == nil {
			loc = time.UTC
		}
		next, err := c.next(t, loc)
		return next, err == nil
	}
	return time.Time{}, false
}

// String describes the spec for people: "every 2s", "cron 0 9 * * *
// (Europe/Berlin)", "at 2026-03-01T09:00:00+01:00".
func (s Spec) String() string {
	switch {
	case s.Every != 0:
		return "every " + s.Every.String()
	case s.Cron != "":
		tz := s.TZ
		if tz == "" {
			tz = "UTC"
		}
		return "cron " + strings.TrimSpace(s.Cron) + " (" + tz + ")"
	case !s.At.IsZero():
		return "at " + s.At.In(s.displayLocation()).Format(time.RFC3339)
	}
	return "never"
}

func (s Spec) displayLocation() *time.Location {
	if loc, err := s.location(); err == nil && loc != nil {
		return loc
	}
	return time.UTC
}

// ParseAt reads an ISO 8601 time. A time with an offset or Z is taken as
// is; a time without one is wall-clock time in loc.
func ParseAt(s string, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04:05.999999999"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: at %q is not an ISO time such as 2026-02-12T10:30:00 or 2026-02-12T10:30:00+01:00", ErrInvalidSchedule, s)
}
