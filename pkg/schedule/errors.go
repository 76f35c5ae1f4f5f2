package schedule

import "errors"

var (
	// ErrInvalidSchedule means a job's timing cannot be scheduled: a bad
	// cron expression, a bad interval, or not exactly one of at, every and
	// cron given.
	ErrInvalidSchedule = errors.New("invalid schedule")
	// ErrUnknownTimeZone means a time zone is not an IANA name the server
	// knows.
	ErrUnknownTimeZone = errors.New("unknown time zone")
	// ErrInPast means a one-time job's time has already passed.
	ErrInPast = errors.New("time is in the past")
	// ErrNotFound means no job has that id (in that session).
	ErrNotFound = errors.New("job not found")
	// ErrAmbiguous means a job id matches jobs of several sessions.
	ErrAmbiguous = errors.New("job id matches several jobs")
	// ErrTooManyJobs means the session has reached its job limit.
	ErrTooManyJobs = errors.New("too many jobs")
	// ErrNestedJob means a fired job tried to schedule another.
	ErrNestedJob = errors.New("cannot schedule jobs from a scheduled job's turn")
)

// ErrInvalidOption wraps a bad option value.
var ErrInvalidOption = errors.New("schedule: invalid option")
