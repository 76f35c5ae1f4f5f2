package schedule

// The parser follows the one nats-server uses for Nats-Schedule cron
// patterns (itself based on github.com/robfig/cron, MIT licence), so that a
// pattern accepted here is accepted by the server and the next fire time
// computed here is the one the server will use.

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// cronExpr is a parsed 6-field cron expression: a bit set per field.
type cronExpr struct {
	second, minute, hour, dom, month, dow uint64
}

type cronField struct {
	name     string
	min, max uint
	names    map[string]uint
}

var cronFields = [6]cronField{
	{name: "second", min: 0, max: 59},
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day of month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: map[string]uint{
		"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
	}},
	{name: "day of week", min: 0, max: 6, names: map[string]uint{
		"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6,
	}},
}

// starBit marks a field written as "*" or "?" (it changes how day of month
// and day of week combine).
const starBit = 1 << 63

var cronDescriptors = map[string]string{
	"@yearly":   "0 0 0 1 1 *",
	"@annually": "0 0 0 1 1 *",
	"@monthly":  "0 0 0 1 * *",
	"@weekly":   "0 0 0 * * 0",
	"@daily":    "0 0 0 * * *",
	"@midnight": "0 0 0 * * *",
	"@hourly":   "0 0 * * * *",
}

// serverCron returns the 6-field form the server takes: a 5-field
// expression (minute first, as in crontab and nanobot) gets second 0.
func serverCron(expr string) (string, error) {
	expr = strings.TrimSpace(expr)
	if d, ok := cronDescriptors[strings.ToLower(expr)]; ok {
		return d, nil
	}
	fields := strings.Fields(expr)
	switch len(fields) {
	case 5:
		return "0 " + strings.Join(fields, " "), nil
	case 6:
		return strings.Join(fields, " "), nil
	default:
		return "", fmt.Errorf("%w: cron expression %q has %d fields, want 5 (minute hour day-of-month month day-of-week) or 6 (with seconds first)",
			ErrInvalidSchedule, expr, len(fields))
	}
}

// parseCron parses a 5- or 6-field expression or a descriptor (@daily...).
func parseCron(expr string) (*cronExpr, error) {
	full, err := serverCron(expr)
	if err != nil {
		return nil, err
	}
	fields := strings.Fields(full)
	var bits [6]uint64
	for i, f := range fields {
		b, err := parseCronField(f, cronFields[i])
		if err != nil {
			return nil, fmt.Errorf("%w: cron expression %q: %s: %w", ErrInvalidSchedule, strings.TrimSpace(expr), cronFields[i].name, err)
		}
		bits[i] = b
	}
	c := &cronExpr{second: bits[0], minute: bits[1], hour: bits[2], dom: bits[3], month: bits[4], dow: bits[5]}
	// A pattern that never fires (e.g. 31 February) is rejected by the
	// server when published; find out here with a reason.
	if _, err := c.next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.UTC); err != nil {
		return nil, fmt.Errorf("%w: cron expression %q never fires", ErrInvalidSchedule, strings.TrimSpace(expr))
	}
	return c, nil
}

// parseCronField parses a comma-separated list of ranges.
func parseCronField(field string, f cronField) (uint64, error) {
	var bits uint64
	for _, expr := range strings.Split(field, ",") {
		if expr == "" {
			return 0, fmt.Errorf("empty list item in %q", field)
		}
		b, err := parseCronRange(expr, f)
		if err != nil {
			return 0, err
		}
		bits |= b
	}
	return bits, nil
}

// parseCronRange parses number | name | * | ? , optionally "-" end, optionally "/" step.
func parseCronRange(expr string, f cronField) (uint64, error) {
	rangeAndStep := strings.Split(expr, "/")
	lowHigh := strings.Split(rangeAndStep[0], "-")
	var start, end, step uint
	var extra uint64
	var err error
	if lowHigh[0] == "*" || lowHigh[0] == "?" {
		if len(lowHigh) > 1 {
			return 0, fmt.Errorf("%q: a range cannot start with *", expr)
		}
		start, end, extra = f.min, f.max, starBit
	} else {
		if start, err = cronValue(lowHigh[0], f); err != nil {
			return 0, err
		}
		switch len(lowHigh) {
		case 1:
			end = start
		case 2:
			if end, err = cronValue(lowHigh[1], f); err != nil {
				return 0, err
			}
		default:
			return 0, fmt.Errorf("%q: too many hyphens", expr)
		}
	}
	switch len(rangeAndStep) {
	case 1:
		step = 1
	case 2:
		n, err := strconv.Atoi(rangeAndStep[1])
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%q: step must be a positive number", expr)
		}
		step = uint(n)
		if len(lowHigh) == 1 {
			end = f.max // "N/step" means "N-max/step"
		}
		if step > 1 {
			extra = 0
		}
	default:
		return 0, fmt.Errorf("%q: too many slashes", expr)
	}
	switch {
	case start < f.min || end > f.max:
		return 0, fmt.Errorf("%q: out of range %d-%d", expr, f.min, f.max)
	case start > end:
		return 0, fmt.Errorf("%q: range start %d is after its end %d", expr, start, end)
	}
	var bits uint64
	for i := start; i <= end; i += step {
		bits |= 1 << i
	}
	return bits | extra, nil
}

func cronValue(s string, f cronField) (uint, error) {
	if v, ok := f.names[strings.ToLower(s)]; ok {
		return v, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if n < 0 || n > math.MaxInt16 {
		return 0, fmt.Errorf("%d: out of range %d-%d", n, f.min, f.max)
	}
	return uint(n), nil
}

// next returns the first time strictly after t (at whole seconds) that
// matches, in loc.
func (c *cronExpr) next(t time.Time, loc *time.Location) (time.Time, error) {
	t = t.In(loc).Truncate(time.Second).Add(time.Second)
	truncated := false
	yearLimit := t.Year() + 5
wrap:
	if t.Year() > yearLimit {
		return time.Time{}, fmt.Errorf("%w: no fire time within five years", ErrInvalidSchedule)
	}
	for 1<<uint(t.Month())&c.month == 0 {
		if !truncated {
			truncated = true
			t = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
		}
		if t = t.AddDate(0, 1, 0); t.Month() == time.January {
			goto wrap
		}
	}
	for !c.dayMatches(t) {
		if !truncated {
			truncated = true
			t = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
		}
		if t = t.AddDate(0, 0, 1); t.Day() == 1 {
			goto wrap
		}
	}
	for 1<<uint(t.Hour())&c.hour == 0 {
		if !truncated {
			truncated = true
			t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, loc)
		}
		if t = t.Add(time.Hour); t.Hour() == 0 {
			goto wrap
		}
	}
	for 1<<uint(t.Minute())&c.minute == 0 {
		if !truncated {
			truncated = true
			t = t.Truncate(time.Minute)
		}
		if t = t.Add(time.Minute); t.Minute() == 0 {
			goto wrap
		}
	}
	for 1<<uint(t.Second())&c.second == 0 {
		if !truncated {
			truncated = true
			t = t.Truncate(time.Second)
		}
		if t = t.Add(time.Second); t.Second() == 0 {
			goto wrap
		}
	}
	return t, nil
}

// dayMatches: with either day field a star both must match, otherwise
// either may (as in crontab).
func (c *cronExpr) dayMatches(t time.Time) bool {
	domMatch := 1<<uint(t.Day())&c.dom > 0
	dowMatch := 1<<uint(t.Weekday())&c.dow > 0
	if c.dom&starBit > 0 || c.dow&starBit > 0 {
		return domMatch && dowMatch
	}
	return domMatch || dowMatch
}
