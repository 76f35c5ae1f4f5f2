package memory

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Headers of system job schedule messages and their fires.
const (
	// HeaderSystemJob names the system job ("dream"); jobs with it are
	// owned by the fleet: users see them and cannot delete them.
	HeaderSystemJob = "Nanofleet-System-Job"
)

// Job is a system job as the cron tool and /dream-log show it.
type Job struct {
	Name  string
	Agent string
	// Schedule is the NATS schedule, e.g. "@every 2h0m0s" or a cron
	// expression.
	Schedule string
	TimeZone string
	// Next is when it fires next, when a fire has told so; zero otherwise.
	Next time.Time
}

// String describes the job for people.
func (j Job) String() string {
	s := fmt.Sprintf("%s (system job, agent %s): %s", j.Name, j.Agent, j.Schedule)
	if j.TimeZone != "" {
		s += " " + j.TimeZone
	}
	if !j.Next.IsZero() {
		s += ", next " + formatTime(j.Next)
	}
	return s + ". It can be seen but not deleted."
}

// ListJobs returns the fleet's memory system jobs. They are re-created by
// the memory-consolidator whenever they go missing.
func ListJobs(ctx context.Context, b *bus.Bus) ([]Job, error) {
	n := NamesOf(b.Space)
	msgs, err := b.Direct.Range(ctx, n.JobStream(), n.JobSchedules(), 1, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("list system jobs: %w", err)
	}
	st, err := b.JS.Stream(ctx, n.JobStream())
	if err != nil {
		return nil, fmt.Errorf("list system jobs: %w", err)
	}
	var out []Job
	for _, m := range msgs {
		fire := &nanofleetv1.SystemJobFire{}
		sched := bus.ScheduleOf(m.Header)
		if err := proto.Unmarshal(m.Data, fire); err != nil || sched.Pattern == "" {
			continue
		}
		out = append(out, jobOf(ctx, st, n, fire.GetJob(), fire.GetAgent(), sched))
	}
	return out, nil
}

// DescribeJob tells when a system job runs.
func DescribeJob(ctx context.Context, js jetstream.JetStream, n Names, job, agent string) (string, error) {
	st, err := js.Stream(ctx, n.JobStream())
	if err != nil {
		return "", err
	}
	m, err := st.GetLastMsgForSubject(ctx, n.JobSchedule(job, agent))
	if err != nil {
		return "", err
	}
	j := jobOf(ctx, st, n, job, agent, bus.ScheduleOf(m.Header))
	return capitalize(strings.TrimSpace(j.String())), nil
}

// jobOf is the job of a schedule, with its next fire as its last fire
// says.
func jobOf(ctx context.Context, st jetstream.Stream, n Names, job, agent string, sched bus.Schedule) Job {
	j := Job{Name: job, Agent: agent, Schedule: sched.Pattern, TimeZone: sched.TimeZone}
	if last, err := st.GetLastMsgForSubject(ctx, n.JobFire(job, agent)); err == nil {
		j.Next, _ = bus.NextFire(last.Header)
	}
	return j
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
