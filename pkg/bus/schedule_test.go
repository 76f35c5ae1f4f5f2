package bus_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nanofleet/nanofleet/pkg/bus"
)

func TestScheduleRoundTrip(t *testing.T) {
	for _, s := range []bus.Schedule{
		{Pattern: "@every 1h", Target: "x.fire.a"},
		{Pattern: "0 0 9 * * *", Target: "x.fire.b", TimeZone: "Europe/Lisbon"},
	} {
		m := s.Msg("x.sched.a", []byte("body"))
		if got := bus.ScheduleOf(m.Header); got != s || string(m.Data) != "body" || m.Subject != "x.sched.a" {
			t.Errorf("%+v: read back %+v from %v", s, got, m)
		}
		if _, set := m.Header[bus.HeaderScheduleTimeZone]; set != (s.TimeZone != "") {
			t.Errorf("%+v: time zone header set = %v", s, set)
		}
	}
	if got := bus.ScheduleOf(nats.Header{}); got.Pattern != "" {
		t.Errorf("a plain message read as the schedule %+v", got)
	}
}

func TestNextFire(t *testing.T) {
	at := time.Date(2026, 12, 2, 18, 0, 0, 500, time.UTC)
	tests := []struct {
		name   string
		header string
		want   time.Time
		ok     bool
	}{
		{"next", at.Format(time.RFC3339Nano), at, true},
		{"last fire", bus.ScheduleNextPurge, time.Time{}, false},
		{"none", "", time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := nats.Header{}
			if tt.header != "" {
				h.Set(bus.HeaderScheduleNext, tt.header)
			}
			if got, ok := bus.NextFire(h); ok != tt.ok || !got.Equal(tt.want) {
				t.Errorf("NextFire = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
