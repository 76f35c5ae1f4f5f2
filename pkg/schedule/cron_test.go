package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCronNext(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	kolkata, _ := time.LoadLocation("Asia/Kolkata")
	base := time.Date(2026, 3, 10, 8, 30, 15, 0, time.UTC) // a Tuesday
	tests := []struct {
		expr string
		loc  *time.Location
		from time.Time
		want time.Time
	}{
		{"0 9 * * *", time.UTC, base, time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)},
		{"*/15 * * * *", time.UTC, base, time.Date(2026, 3, 10, 8, 45, 0, 0, time.UTC)},
		{"*/2 * * * * *", time.UTC, base, time.Date(2026, 3, 10, 8, 30, 16, 0, time.UTC)},
		{"0 9 * * 1-5", time.UTC, time.Date(2026, 3, 13, 10, 0, 0, 0, time.UTC), time.Date(2026, 3, 16, 9, 0, 0, 0, time.UTC)},
		{"0 9 * * mon", time.UTC, base, time.Date(2026, 3, 16, 9, 0, 0, 0, time.UTC)},
		{"0 0 1 jan *", time.UTC, base, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"@daily", time.UTC, base, time.Date(2026, 3, 11, 0, 0, 0, 0, time.UTC)},
		{"@hourly", time.UTC, base, time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)},
		// 09:00 in Berlin is 08:00 UTC in winter: already past, so tomorrow.
		{"0 9 * * *", berlin, base, time.Date(2026, 3, 11, 9, 0, 0, 0, berlin)},
		{"0 15 * * *", kolkata, base, time.Date(2026, 3, 10, 15, 0, 0, 0, kolkata)},
		// Day of month and day of week both restricted: either matches.
		{"0 0 13 * 5", time.UTC, base, time.Date(2026, 3, 13, 0, 0, 0, 0, time.UTC)},
		{"0 0 29 2 *", time.UTC, base, time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			c, err := parseCron(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.next(tt.from, tt.loc)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tt.want) {
				t.Errorf("next(%s) = %s, want %s", tt.from, got, tt.want)
			}
		})
	}
}

func TestCronInvalid(t *testing.T) {
	tests := []struct{ expr, reason string }{
		{"61 * * * *", "minute"},
		{"* 24 * * *", "hour"},
		{"* * 0 * *", "day of month"},
		{"* * * 13 *", "month"},
		{"* * * * 7", "day of week"},
		{"* * * *", "has 4 fields"},
		{"a b c d e", "not a number"},
		{"*/0 * * * *", "step"},
		{"5-1 * * * *", "after its end"},
		{"0 0 31 2 *", "never fires"},
		{"1,,2 * * * *", "empty"},
		{"@fortnightly", "has 1 fields"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			_, err := parseCron(tt.expr)
			if !errors.Is(err, ErrInvalidSchedule) {
				t.Fatalf("parseCron(%q) = %v, want ErrInvalidSchedule", tt.expr, err)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("error %q does not give the reason %q", err, tt.reason)
			}
		})
	}
}

func TestSpecValidate(t *testing.T) {
	now := time.Date(2026, 3, 10, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		spec Spec
		want error
	}{
		{"every", Spec{Every: 2 * time.Second}, nil},
		{"cron with zone", Spec{Cron: "0 9 * * *", TZ: "America/Vancouver"}, nil},
		{"future at", Spec{At: now.Add(time.Minute)}, nil},
		{"none", Spec{}, ErrInvalidSchedule},
		{"two", Spec{Every: time.Second, Cron: "* * * * *"}, ErrInvalidSchedule},
		{"sub-second", Spec{Every: 500 * time.Millisecond}, ErrInvalidSchedule},
		{"fractional", Spec{Every: 1500 * time.Millisecond}, ErrInvalidSchedule},
		{"zone with every", Spec{Every: time.Second, TZ: "UTC"}, ErrInvalidSchedule},
		{"past at", Spec{At: now.Add(-time.Second)}, ErrInPast},
		{"unknown zone", Spec{Cron: "0 9 * * *", TZ: "Mars/Olympus"}, ErrUnknownTimeZone},
		{"local zone", Spec{Cron: "0 9 * * *", TZ: "Local"}, ErrUnknownTimeZone},
		{"bad cron", Spec{Cron: "0 25 * * *"}, ErrInvalidSchedule},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec.Validate(now)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Validate = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestParseAt(t *testing.T) {
	kathmandu, _ := time.LoadLocation("Asia/Kathmandu")
	tests := []struct {
		in   string
		loc  *time.Location
		want time.Time
	}{
		{"2026-02-12T10:30:00", kathmandu, time.Date(2026, 2, 12, 4, 45, 0, 0, time.UTC)},
		{"2026-02-12T10:30:00Z", kathmandu, time.Date(2026, 2, 12, 10, 30, 0, 0, time.UTC)},
		{"2026-02-12T10:30:00+01:00", time.UTC, time.Date(2026, 2, 12, 9, 30, 0, 0, time.UTC)},
		{"2026-02-12 10:30", time.UTC, time.Date(2026, 2, 12, 10, 30, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		got, err := ParseAt(tt.in, tt.loc)
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("ParseAt(%q) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	if _, err := ParseAt("tomorrow", time.UTC); !errors.Is(err, ErrInvalidSchedule) {
		t.Errorf("ParseAt(tomorrow) = %v", err)
	}
}

func TestEveryNext(t *testing.T) {
	stored := time.Date(2026, 3, 10, 8, 0, 0, 400e6, time.UTC)
	j := Job{Spec: Spec{Every: 10 * time.Second}}
	if got, want := j.next(stored, time.Time{}, stored), stored.Round(time.Second).Add(10*time.Second); !got.Equal(want) {
		t.Errorf("first = %s, want %s", got, want)
	}
	now := stored.Add(35 * time.Second)
	if got, want := j.next(now, time.Time{}, stored), time.Date(2026, 3, 10, 8, 0, 40, 0, time.UTC); !got.Equal(want) {
		t.Errorf("later = %s, want %s", got, want)
	}
	last := time.Date(2026, 3, 10, 8, 0, 43, 0, time.UTC) // after a restart the phase moved
	if got := j.next(now, last, stored); !got.Equal(last) {
		t.Errorf("with last fire = %s, want %s", got, last)
	}
}
