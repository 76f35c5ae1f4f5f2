// Package quota keeps each workspace within a byte and a file quota, so
// one session cannot fill the disk that the JetStream store (and every
// other workspace) lives on.
//
// Nothing in the kernel bounds a directory tree without file system
// quotas, so usage is measured: a walk of the workspace that follows no
// symlink, counting every entry (files, directories, links) and the disk
// blocks of each (what the file system really spends, so a sparse file
// costs what it holds). A [Meter] keeps the last measurement of each
// workspace for a few seconds, adds what the runner's own writes are
// about to add, and measures again after every command, which may have
// written anything, and while it runs: a command that takes the
// workspace over its quota is stopped.
//
// A quota bounds one workspace, not the disk: where the workspaces share
// a file system with the message store, [Limits.KeepFree] keeps that much
// of it free whatever the quotas allow (the file system's free space is
// read with statfs, cheap enough to look at every 10 ms while a
// command runs).
package quota

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"time"

	"github.com/nanofleet/nanofleet/pkg/every"
	"golang.org/x/sync/singleflight"
	"golang.org/x/sys/unix"
)

// Limits of one workspace; zero means no limit.
type Limits struct {
	Bytes int64
	Files int64
	// KeepFree is how many bytes of the workspace's file system writes
	// and commands leave free (the message store's room when the two
	// share it).
	KeepFree int64
}

// On reports whether any limit is set.
func (l Limits) On() bool { return l.counted() || l.KeepFree > 0 }

// counted reports whether a limit needs the workspace measured.
func (l Limits) counted() bool { return l.Bytes > 0 || l.Files > 0 }

// Usage of one workspace.
type Usage struct {
	Bytes int64
	Files int64
}

// Over reports whether u is beyond l.
func (u Usage) Over(l Limits) bool {
	return (l.Bytes > 0 && u.Bytes > l.Bytes) || (l.Files > 0 && u.Files > l.Files)
}

// Meter holds the quota of every workspace a runner serves.
type Meter struct {
	limits Limits
	ttl    time.Duration
	now    func() time.Time

	mu sync.Mutex
	ws map[string]*entry
	// walks shares one measurement of a workspace among the calls that
	// want it at once.
	walks singleflight.Group
}

type entry struct {
	usage Usage
	// unmeasurable, when set, is the refusal that stands for the usage:
	// an entry could not be measured.
	unmeasurable error
	at           time.Time
}

// NewMeter returns a meter that trusts a measurement for ttl.
func NewMeter(l Limits, ttl time.Duration) *Meter {
	return &Meter{limits: l, ttl: ttl, now: time.Now, ws: map[string]*entry{}}
}

// Limits are the meter's limits.
func (m *Meter) Limits() Limits { return m.limits }

// Usage returns dir's usage, measuring root when the last measurement is
// older than the meter's ttl or fresh is set. A workspace with an entry
// that cannot be measured is refused as over its quota: the error wraps
// [ErrExceeded] and says which entry to delete.
func (m *Meter) Usage(ctx context.Context, dir string, root *os.Root, fresh bool) (Usage, error) {
	m.mu.Lock()
	e := m.ws[dir]
	if e != nil && !fresh && m.now().Sub(e.at) < m.ttl {
		u, err := e.usage, e.unmeasurable
		m.mu.Unlock()
		return u, err
	}
	m.mu.Unlock()
	// Measured unlocked (other workspaces need not wait for this walk),
	// once for all who ask meanwhile, and to its own end: a caller whose
	// deadline comes first stops waiting, not the walk.
	ch := m.walks.DoChan(dir, func() (any, error) {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), measureTimeout)
		defer cancel()
		u, err := Measure(wctx, root, 2*m.limits.Files)
		var ue *UnmeasurableError
		if errors.As(err, &ue) {
			err = m.unmeasurable(ue)
		} else if err != nil {
			return u, err
		}
		m.mu.Lock()
		m.ws[dir] = &entry{usage: u, unmeasurable: err, at: m.now()}
		m.mu.Unlock()
		return u, err
	})
	select {
	case r := <-ch:
		return r.Val.(Usage), r.Err
	case <-ctx.Done():
		return Usage{}, fmt.Errorf("measure workspace: %w", context.Cause(ctx))
	}
}

// Forget drops dir's last measurement, so that the next look measures
// it: a file tool's write may have added more than was reserved for it.
func (m *Meter) Forget(dir string) {
	m.mu.Lock()
	delete(m.ws, dir)
	m.mu.Unlock()
}

// Reserve checks that adding add to dir's usage stays within the limits
// and counts it as added. The error says what to do.
func (m *Meter) Reserve(ctx context.Context, dir string, root *os.Root, add Usage) error {
	if room, err := m.room(dir); err != nil {
		return err
	} else if room < add.Bytes {
		return m.diskRefusal(room, fmt.Sprintf("writing about %s more would leave less", Bytes(add.Bytes)))
	}
	if !m.limits.counted() {
		return nil
	}
	u, err := m.Usage(ctx, dir, root, false)
	if err != nil {
		return err
	}
	if u.Over(m.limits) {
		return m.refusal(u, "")
	}
	next := Usage{Bytes: u.Bytes + add.Bytes, Files: u.Files + add.Files}
	if next.Over(m.limits) {
		return m.refusal(u, fmt.Sprintf("writing about %s more would take it beyond", Bytes(add.Bytes)))
	}
	m.mu.Lock()
	if e := m.ws[dir]; e != nil {
		e.usage.Bytes += add.Bytes
		e.usage.Files += add.Files
	}
	m.mu.Unlock()
	return nil
}

// Left is how many bytes dir may still grow by (negative: over the
// quota or into the room kept free, no file may grow; 0: no byte limit).
func (m *Meter) Left(ctx context.Context, dir string, root *os.Root) (int64, error) {
	room, err := m.room(dir)
	if err != nil {
		return 0, err
	}
	if room <= 0 {
		return -1, nil
	}
	if !m.limits.counted() {
		if room == math.MaxInt64 {
			return 0, nil
		}
		return room, nil
	}
	u, err := m.Usage(ctx, dir, root, false)
	switch {
	case errors.Is(err, ErrExceeded): // unmeasurable: a command may still delete
		return -1, nil
	case err != nil:
		return 0, err
	}
	switch {
	case u.Over(m.limits):
		return -1, nil
	case m.limits.Bytes == 0:
		if room == math.MaxInt64 {
			return 0, nil
		}
		return room, nil
	}
	return max(min(m.limits.Bytes-u.Bytes, room), 1), nil
}

// room is how many bytes may still be written to dir's file system
// before it holds less than KeepFree (MaxInt64 without KeepFree).
func (m *Meter) room(dir string) (int64, error) {
	if m.limits.KeepFree <= 0 {
		return math.MaxInt64, nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	return int64(st.Bavail)*int64(st.Bsize) - m.limits.KeepFree, nil
}

// WatchEvery is how often [Meter.Watch] measures a workspace at least;
// a workspace that takes long to measure is measured less often (at most
// a fifth of the time goes to measuring).
const WatchEvery = time.Second

// FreeEvery is how often [Meter.Watch] reads the free space of the file
// system when [Limits.KeepFree] is set.
const FreeEvery = 10 * time.Millisecond

// Watch measures dir while a command runs and calls stop with the refusal
// as soon as dir is over its quota or its file system holds less than
// KeepFree; it returns then or when ctx ends. RLIMIT_FSIZE bounds each
// file a command writes; this bounds how far several files together go
// past the limits (what the command writes between two looks).
func (m *Meter) Watch(ctx context.Context, dir string, root *os.Root, stop func(error)) {
	if !m.limits.On() {
		return
	}
	step := WatchEvery
	if m.limits.KeepFree > 0 {
		step = FreeEvery
	}
	nextWalk := time.Now().Add(WatchEvery)
	every.Tick(ctx, step, func() bool {
		if room, err := m.room(dir); err == nil && room < 0 {
			stop(m.diskRefusal(room, ""))
			return false
		}
		if !m.limits.counted() || time.Now().Before(nextWalk) {
			return true
		}
		start := time.Now()
		u, err := m.Usage(ctx, dir, root, true)
		switch {
		case errors.Is(err, ErrExceeded):
			stop(err)
			return false
		case err == nil && u.Over(m.limits):
			stop(m.refusal(u, ""))
			return false
		}
		nextWalk = time.Now().Add(max(WatchEvery, 5*time.Since(start)))
		return true
	})
}

// AfterCommand measures dir again (a command may have written anything)
// and returns a note for the model when it is over the quota.
func (m *Meter) AfterCommand(ctx context.Context, dir string, root *os.Root) (string, error) {
	if room, err := m.room(dir); err != nil {
		return "", err
	} else if room < 0 {
		return m.diskRefusal(room, "").Error(), nil
	}
	if !m.limits.counted() {
		return "", nil
	}
	u, err := m.Usage(ctx, dir, root, true)
	switch {
	case errors.Is(err, ErrExceeded):
		return err.Error(), nil
	case err != nil || !u.Over(m.limits):
		return "", err
	}
	return m.refusal(u, "").Error(), nil
}

// unmeasurable is the refusal for a workspace with an entry Measure
// could not count: it says which, and how to be rid of it.
func (m *Meter) unmeasurable(e *UnmeasurableError) error {
	return fmt.Errorf("%w: %q in the workspace cannot be measured (%v), so the workspace counts as over its quota of %s (tools.workspace.quotaBytes, quotaFiles). "+
		"Writes are refused and commands cannot grow files until you delete it (for example with exec: rm -rf -- %q) or make it readable (chmod -R u+rwX)",
		ErrExceeded, e.Path, e.Err, m.describeLimits(), e.Path)
}

func (m *Meter) refusal(u Usage, what string) error {
	if what == "" {
		what = "it is over"
	}
	return fmt.Errorf("%w: the workspace holds %s in %d files and directories; %s its quota of %s (tools.workspace.quotaBytes, quotaFiles). "+
		"Writes are refused and commands cannot grow files until you delete what is no longer needed (for example with exec: rm -r build outputs, downloads, caches), or ask the operator to raise the quota",
		ErrExceeded, Bytes(u.Bytes), u.Files, what, m.describeLimits())
}

// diskRefusal says that the workspace's file system is down to the room
// kept free (room bytes above it; negative: below it); what, when set,
// is the write that would go below it.
func (m *Meter) diskRefusal(room int64, what string) error {
	free, keep := Bytes(max(room+m.limits.KeepFree, 0)), Bytes(m.limits.KeepFree)
	how := fmt.Sprintf("%s free on it, less than the %s", free, keep)
	if what != "" {
		how = fmt.Sprintf("%s free on it; %s than the %s", free, what, keep)
	}
	return fmt.Errorf("%w: %s the fleet keeps free there for its message store (conversations, memory). "+
		"Writes are refused and commands cannot grow files until you delete what is no longer needed (for example with exec: rm -r build outputs, downloads, caches)",
		ErrDiskLow, how)
}

func (m *Meter) describeLimits() string {
	switch l := m.limits; {
	case l.Bytes > 0 && l.Files > 0:
		return fmt.Sprintf("%s and %d files", Bytes(l.Bytes), l.Files)
	case l.Bytes > 0:
		return Bytes(l.Bytes)
	default:
		return fmt.Sprintf("%d files", l.Files)
	}
}

// Bytes formats n in binary units.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
