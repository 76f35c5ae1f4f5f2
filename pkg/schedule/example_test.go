package schedule_test

import (
	"fmt"
	"time"

	"github.com/nanofleet/nanofleet/pkg/schedule"
)

func ExampleSpec() {
	now := time.Date(2026, 3, 10, 8, 0, 0, 0, time.UTC)
	kathmandu, _ := time.LoadLocation("Asia/Kathmandu")
	at, _ := schedule.ParseAt("2026-03-10T18:30:00", kathmandu)
	for _, s := range []schedule.Spec{
		{Every: 2 * time.Second},
		{Cron: "0 9 * * 1-5", TZ: "Europe/Berlin"},
		{At: at, TZ: "Asia/Kathmandu"},
		{Cron: "0 9 * * 8"},
		{Cron: "0 9 * * *", TZ: "Mars/Olympus"},
		{At: now.Add(-time.Minute)},
	} {
		if err := s.Validate(now); err != nil {
			fmt.Println("rejected:", err)
			continue
		}
		fmt.Println(s)
	}
	// Output:
	// every 2s
	// cron 0 9 * * 1-5 (Europe/Berlin)
	// at 2026-03-10T18:30:00+05:45
	// rejected: invalid schedule: cron expression "0 9 * * 8": day of week: "8": out of range 0-6
	// rejected: unknown time zone: "Mars/Olympus" (use an IANA name such as Europe/Berlin or America/New_York)
	// rejected: time is in the past: 2026-03-10T07:59:00Z is before now (2026-03-10T08:00:00Z)
}
