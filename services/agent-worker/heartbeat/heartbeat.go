package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/pkg/schedule"
	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

const (
	// Channel is the channel of heartbeat turns; no gateway serves it.
	Channel = "heartbeat"
	// OKToken is the model's answer when nothing needs attention.
	OKToken = "HEARTBEAT_OK"
	// JobID is the id of an agent's heartbeat job.
	JobID = "heartbeat"
	// File is the profile file the tasks are read from.
	File = "HEARTBEAT.md"
	// NotifyConsumer is the durable consumer the notifiers share.
	NotifyConsumer = "heartbeat_notify"
)

// Config tunes the heartbeat. The fields with a json tag are the config
// file's "schedule.heartbeat" section, decoded straight into it.
type Config struct {
	// Enabled runs the job; when false [Service.Ensure] removes it.
	Enabled bool `json:"enabled"`
	// Agent whose HEARTBEAT.md is read.
	Agent string `json:"-"`
	// Every is the interval, whole seconds.
	Every config.Seconds `json:"intervalS"`
	// KeepTurns is how many past heartbeat turns the session keeps.
	KeepTurns int `json:"keepTurns"`
	// NotifyChannel and NotifyChat fix where notices go. Empty means the
	// chat the fleet replies to, as in nanobot, when it is known to be the
	// operator's (see [Operators]): with other people's chats answered,
	// the last may be a stranger's, so a notice goes nowhere (and is
	// logged).
	NotifyChannel string `json:"notifyChannel"`
	NotifyChat    string `json:"notifyChat"`
	// SkipChannels are never chosen as the last active chat (besides the
	// fleet's internal channels).
	SkipChannels []string `json:"-"`
}

// DefaultConfig returns nanobot's defaults.
func DefaultConfig() Config {
	return Config{Enabled: true, Agent: profile.DefaultAgent, Every: config.Seconds(30 * time.Minute), KeepTurns: 6}
}

// Validate reports every invalid key, joined; a field that code sets is
// a plain error.
func (c Config) Validate() error {
	if c.Agent == "" {
		return errors.New("heartbeat: agent must be set")
	}
	var p config.Problems
	if c.Enabled && (time.Duration(c.Every) < time.Second || time.Duration(c.Every)%time.Second != 0) {
		p.Add("schedule.heartbeat.intervalS", "%s, want whole seconds, at least 1s", c.Every)
	}
	if c.KeepTurns < 1 {
		p.Add("schedule.heartbeat.keepTurns", "%d, want at least 1", c.KeepTurns)
	}
	switch {
	case c.NotifyChannel == "" && c.NotifyChat != "":
		p.Add("schedule.heartbeat.notifyChannel", "must be set with notifyChat")
	case c.NotifyChannel != "" && c.NotifyChat == "":
		p.Add("schedule.heartbeat.notifyChat", "must be set with notifyChannel")
	}
	return p.Err()
}

// SessionKey is the heartbeat session of agent.
func SessionKey(agent string) string { return session.Key(Channel, agent) }

// Service runs an agent's heartbeat.
type Service struct {
	b        *bus.Bus
	cfg      Config
	log      *slog.Logger
	sched    *schedule.Scheduler
	profiles *profile.Cache
	hist     jetstream.Stream
	now      func() time.Time
}

// Option changes an optional setting of [New].
type Option func(*Service)

// WithLogger sets the heartbeat's logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(s *Service) { s.log = observe.OrDiscard(l) } }

// Deps is what the heartbeat works with, all required.
type Deps struct {
	Bus *bus.Bus
	// Scheduler stores the heartbeat's job.
	Scheduler *schedule.Scheduler
	// Profiles gives the agent's HEARTBEAT.md.
	Profiles *profile.Cache
}

// New returns the heartbeat of cfg.Agent.
func New(ctx context.Context, cfg Config, d Deps, opts ...Option) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b, sched, profiles := d.Bus, d.Scheduler, d.Profiles
	if b == nil || sched == nil || profiles == nil {
		return nil, errors.New("heartbeat: Bus, Scheduler and Profiles are required")
	}
	hist, err := b.JS.Stream(ctx, b.Space.HistoryStream())
	if err != nil {
		return nil, fmt.Errorf("heartbeat: history stream: %w", err)
	}
	s := &Service{b: b, cfg: cfg, log: slog.New(slog.DiscardHandler), sched: sched, profiles: profiles, hist: hist, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	s.log = s.log.With("component", "heartbeat", "agent", cfg.Agent)
	return s, nil
}

// Ensure makes the stored job match the config: created, changed,
// removed, or left alone when it already matches.
func (s *Service) Ensure(ctx context.Context) error {
	key := SessionKey(s.cfg.Agent)
	cur, err := s.sched.Get(ctx, key, JobID)
	found := err == nil
	if err != nil && !errors.Is(err, schedule.ErrNotFound) {
		return fmt.Errorf("heartbeat: %w", err)
	}
	if !s.cfg.Enabled {
		if found {
			if _, err := s.sched.Remove(ctx, key, JobID); err != nil && !errors.Is(err, schedule.ErrNotFound) {
				return fmt.Errorf("heartbeat: remove job: %w", err)
			}
			s.log.Info("heartbeat disabled")
		}
		return nil
	}
	if found && cur.Spec.Every == time.Duration(s.cfg.Every) {
		return nil
	}
	j, err := s.sched.Add(ctx, schedule.Job{
		ID: JobID, SessionKey: key, Channel: Channel, ChatID: s.cfg.Agent,
		Message: prompt("(see HEARTBEAT.md)", time.Time{}),
		Spec:    schedule.Spec{Every: time.Duration(s.cfg.Every)},
		Kind:    nanofleetv1.InboundKind_INBOUND_KIND_HEARTBEAT,
	})
	if err != nil {
		return fmt.Errorf("heartbeat: store job: %w", err)
	}
	s.log.Info("heartbeat scheduled", "every", s.cfg.Every, "next", j.Next)
	return nil
}

// Prepare is the relay hook of heartbeat fires (other fires pass): it
// skips a fire when the agent's HEARTBEAT.md has no active tasks, trims
// the heartbeat session, and puts the tasks into the message.
func (s *Service) Prepare(ctx context.Context, in *nanofleetv1.InboundMessage) (bool, error) {
	if in.GetKind() != nanofleetv1.InboundKind_INBOUND_KIND_HEARTBEAT {
		return true, nil
	}
	agent := in.GetChatId()
	tasks := ActiveTasks(s.profiles.Get(agent).Files[File])
	if tasks == "" {
		s.log.Debug("heartbeat skipped: no active tasks", "agent", agent)
		return false, nil
	}
	key := in.GetSessionKey()
	if key == "" {
		key = session.Key(in.GetChannel(), in.GetChatId())
	}
	err := s.hist.Purge(ctx, jetstream.WithPurgeSubject(s.b.Space.History(key)), jetstream.WithPurgeKeep(uint64(s.cfg.KeepTurns)))
	if err != nil {
		return false, fmt.Errorf("heartbeat: trim session %s: %w", key, err)
	}
	fired := s.now()
	if in.GetReceivedAt() != nil {
		fired = in.GetReceivedAt().AsTime()
	}
	in.Content = prompt(tasks, fired)
	return true, nil
}

func prompt(tasks string, at time.Time) string {
	when := ""
	if !at.IsZero() {
		when = " " + at.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf(`[Heartbeat%s]
This is your periodic check. The active tasks in HEARTBEAT.md are:

%s

Work on what needs doing now. If something needs the user's attention, answer with the message for the user. If nothing needs attention, answer with exactly %s.`, when, tasks, OKToken)
}

// ActiveTasks returns the tasks of a HEARTBEAT.md: the lines of its
// "Active Tasks" section (the whole file if it has none) without headings,
// HTML comments, blank lines, empty or completed checkboxes. "" means
// nothing to do.
func ActiveTasks(md string) string {
	lines := strings.Split(strings.ReplaceAll(md, "\r\n", "\n"), "\n")
	start, end := 0, len(lines)
	level := 0
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if lv := headingLevel(t); lv > 0 {
			if level > 0 && lv <= level {
				end = i
				break
			}
			if level == 0 && strings.Contains(strings.ToLower(t), "active tasks") {
				start, level = i+1, lv
			}
		}
	}
	var out []string
	inComment := false
	for _, l := range lines[start:end] {
		t := strings.TrimSpace(l)
		if inComment {
			if _, after, ok := strings.Cut(t, "-->"); ok {
				inComment = false
				t = strings.TrimSpace(after)
			} else {
				continue
			}
		}
		for {
			before, after, ok := strings.Cut(t, "<!--")
			if !ok {
				break
			}
			if _, rest, closed := strings.Cut(after, "-->"); closed {
				t = strings.TrimSpace(before + rest)
				continue
			}
			t, inComment = strings.TrimSpace(before), true
			break
		}
		switch {
		case t == "", headingLevel(t) > 0:
		case isCheckbox(t, " ") && strings.TrimSpace(t[5:]) == "":
		case isCheckbox(t, "x"), isCheckbox(t, "X"):
		default:
			indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
			out = append(out, indent+t)
		}
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

func headingLevel(t string) int {
	n := 0
	for n < len(t) && t[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || (len(t) > n && t[n] != ' ') {
		return 0
	}
	return n
}

// isCheckbox reports "- [m]" or "* [m]" at the start of t.
func isCheckbox(t, mark string) bool {
	return len(t) >= 5 && (t[0] == '-' || t[0] == '*') && t[1:5] == " ["+mark+"]"
}

// IsOK reports whether a reply says nothing needs attention.
func IsOK(reply string) bool {
	norm := strings.Map(func(r rune) rune {
		switch r {
		case '_', '*', '`', ' ', '\n', '\t', '.', '!':
			return -1
		}
		return r
	}, strings.ToUpper(reply))
	return strings.Contains(norm, "HEARTBEATOK")
}
