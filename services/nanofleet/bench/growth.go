package bench

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

// Shapes of the memory suite's fleets.
const (
	shapeAllInOne     = "all-in-one binary"
	shapeMultiProcess = "multi-process"
)

// settleAfterLoad is how long the memory suite lets the fleet idle before
// it reads RSS: the duplicate windows pass (their message ids are dropped
// with them), the server's block caches expire (10 s after the last
// write) and memtrim's trims after activity run (every 10 s for a minute).
func settleAfterLoad(window time.Duration) time.Duration {
	return window + 70*time.Second
}

// memFleet is a running fleet of one shape with a client on its bus.
type memFleet struct {
	procs []*proc
	turn  turnFunc
	bus   *bus.Bus
	pids  []int
	dir   string
	close func()
}

// memSettings are what the memory suite's two phases set differently.
type memSettings struct {
	// contextWindow and answerBytes: see Config.TurnsContextWindow and
	// Config.TurnsAnswerBytes; zero keeps the fleet's window and "ok".
	contextWindow, answerBytes int
}

// startMemFleet starts a fleet of the given shape against a 0 ms model:
// the all-in-one, or a nats-server, tool-runner, agent-worker and
// memory-consolidator process each, so that both shapes consolidate.
func (r *driver) startMemFleet(ctx context.Context, shape string, ms memSettings) (_ *memFleet, err error) {
	var undo []func()
	cleanup := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	bins, err := r.binaries(ctx)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	bed, err := r.newBed("memory-", 0, false, fleetSettings{natsPort: port, windows: r.cfg.MemoryWindow, contextWindow: ms.contextWindow})
	if err != nil {
		return nil, err
	}
	undo = append(undo, bed.close)
	if ms.answerBytes > 0 {
		bed.model.Handle(conversationModel(ms.answerBytes))
	}
	dir, ws, cfgPath := bed.dir, bed.ws, bed.cfgPath
	f := &memFleet{dir: dir, pids: []int{os.Getpid()}}
	var url string
	switch shape {
	case shapeAllInOne:
		aio, err := startAllInOne(ctx, bins, dir, cfgPath, ws)
		if err != nil {
			return nil, err
		}
		undo = append(undo, aio.Kill)
		f.procs = []*proc{aio}
		if url, err = allInOneURL(ctx, dir); err != nil {
			return nil, err
		}
	case shapeMultiProcess:
		cl, err := startCluster(ctx, bins, dir, cfgPath, ws, 1)
		if err != nil {
			return nil, err
		}
		undo = append(undo, cl.stop)
		if err := cl.startConsolidator(ctx, bins, cfgPath); err != nil {
			return nil, err
		}
		f.procs, url = cl.procs(), cl.url
	default:
		return nil, fmt.Errorf("unknown memory shape %q", shape)
	}
	b, err := dial(ctx, url, bed.file)
	if err != nil {
		return nil, err
	}
	undo = append(undo, b.Close)
	cl, err := fleet.NewClient(ctx, b, "bench")
	if err != nil {
		return nil, err
	}
	undo = append(undo, cl.Close)
	for _, p := range f.procs {
		f.pids = append(f.pids, p.Pid())
	}
	f.turn, f.bus, f.close = fleetTurn(cl), b, cleanup
	return f, nil
}

// conversationModel answers a turn with answerBytes of text, and a
// consolidation (a request offering save_memory) with a short history
// entry and MEMORY.md unchanged, as a real model would call the tool.
func conversationModel(answerBytes int) func(*llmtest.RecordedRequest) llmtest.Reply {
	const sentence = "Here is a considered answer with the detail a person asked for, in plain words. "
	answer := strings.Repeat(sentence, answerBytes/len(sentence)+1)[:answerBytes]
	return func(r *llmtest.RecordedRequest) llmtest.Reply {
		for _, t := range r.Tools {
			if t.Function != nil && t.Function.Name == "save_memory" {
				return llmtest.ToolCalls(llmtest.Call("save_memory",
					`{"history_entry":"[2026-01-01 00:00] The user sent numbered messages and got long answers.","memory_update":""}`))
			}
		}
		return llmtest.Text(answer)
	}
}

// history reads the unconsolidated history of the sessions chats of
// the load with prefix: what each of their turns loads.
func (f *memFleet) history(ctx context.Context, prefix string, chats int) (HistoryState, error) {
	st, err := session.Open(ctx, f.bus)
	if err != nil {
		return HistoryState{}, err
	}
	var h HistoryState
	total := 0
	for i := range chats {
		key := session.Key("bench", fmt.Sprintf("%s-%d", prefix, i))
		info, _, err := st.Info(ctx, key)
		if err != nil {
			return HistoryState{}, err
		}
		hist, err := st.LoadHistory(ctx, key, info.GetConsolidatedSeq())
		if err != nil {
			return HistoryState{}, err
		}
		total += len(hist.Turns)
		h.MaxTurns = max(h.MaxTurns, len(hist.Turns))
	}
	h.MeanTurns = float64(total) / float64(max(1, chats))
	h.Pending, err = f.messages(ctx, f.bus.Space.MemoryStream())
	return h, err
}

// consolidations counts the history log's entries: one per consolidated
// range.
func (f *memFleet) consolidations(ctx context.Context) (uint64, error) {
	return f.messages(ctx, memory.NamesOf(f.bus.Space).LogStream())
}

// messages is the number of messages stream holds.
func (f *memFleet) messages(ctx context.Context, stream string) (uint64, error) {
	s, err := f.bus.JS.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	return info.State.Msgs, nil
}

// readRSS reads every process's VmRSS and its anonymous part (RssAnon)
// in MB.
func (f *memFleet) readRSS() (rss, anon []float64, err error) {
	rss, anon = make([]float64, len(f.procs)), make([]float64, len(f.procs))
	for i, p := range f.procs {
		kb, err := memKB(p.Pid(), "VmRSS")
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		akb, err := memKB(p.Pid(), "RssAnon")
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		rss[i], anon[i] = mb(kb), mb(akb)
	}
	return rss, anon, nil
}

// memory measures a fleet of the given shape twice, each on a fresh
// fleet: the resident cost of an idle session (RSS after each step of
// MemorySessions sessions of one turn each, and the least-squares slope
// over the steps), and growth with turns at a fixed session count (RSS
// after TurnsFirst and after TurnsAll turns over TurnSessions sessions).
// The model answers at once, so the load is as dense as the machine
// allows; RSS is read after the fleet has idled MemorySettle.
func (r *driver) memory(ctx context.Context, shape string) (*Memory, error) {
	c := r.cfg
	m := &Memory{Shape: shape, Concurrency: c.MemoryConcurrency, SettleS: c.memorySettle().Seconds()}
	var errs []error
	record := func(s sample) {
		m.Errors += s.Errors
		m.Turns += len(s.Latencies)
		m.ElapsedS += s.Elapsed.Seconds()
		errs = append(errs, s.FirstErr)
	}

	// Idle sessions: each step adds sessions of one turn each.
	f, err := r.startMemFleet(ctx, shape, memSettings{})
	if err != nil {
		return nil, err
	}
	defer f.close()
	// settled runs l on the fleet, lets it idle MemorySettle and reads
	// its RSS, per process.
	settled := func(l load) (rss, anon []float64, err error) {
		record(l.run(ctx, f.turn))
		_ = backoff.Sleep(ctx, c.memorySettle())
		if err := ctx.Err(); err != nil {
			return nil, nil, err // not the turns the figures would claim
		}
		return f.readRSS()
	}
	meter := startCPU(f.pids...)
	rss := make([][]float64, len(f.procs)) // per process, per step
	sessions := 0
	for i, step := range c.MemorySessions {
		l := load{Concurrency: c.MemoryConcurrency, Chats: step - sessions, TurnsPerChat: 1, Prefix: fmt.Sprint("i", i)}
		vs, _, err := settled(l)
		sessions = step
		if err != nil {
			return nil, err
		}
		for p, v := range vs {
			rss[p] = append(rss[p], v)
		}
		r.logf("  memory (%s): %d idle sessions: RSS %v MB", shape, step, vs)
	}
	_, other := meter.stop()
	for i, p := range f.procs {
		peak, _ := memKB(p.Pid(), "VmHWM")
		m.Procs = append(m.Procs, MemoryProc{
			Name: p.Name, Service: p.Name != "nats-server", SessionRSSMB: rss[i], PeakRSSMB: mb(peak),
			KBPerSession: 1024 * slope(c.MemorySessions, rss[i]),
		})
	}
	m.StoreMB = float64(dirSize(f.dir)) / (1 << 20)
	f.close()

	// Turns at a fixed session count: the same sessions go on talking.
	if f, err = r.startMemFleet(ctx, shape, memSettings{contextWindow: c.TurnsContextWindow, answerBytes: c.TurnsAnswerBytes}); err != nil {
		return nil, err
	}
	defer f.close()
	meter = startCPU(f.pids...)
	first := load{Concurrency: c.MemoryConcurrency, Chats: c.TurnSessions, TurnsPerChat: max(1, c.TurnsFirst/c.TurnSessions), Prefix: "t"}
	rss1, anon1, err := settled(first)
	if err != nil {
		return nil, err
	}
	h1, err := f.history(ctx, first.Prefix, first.Chats)
	if err != nil {
		return nil, err
	}
	rest := first
	rest.TurnsPerChat = max(1, (c.TurnsAll-c.TurnsFirst)/c.TurnSessions)
	rss2, anon2, err := settled(rest)
	if err != nil {
		return nil, err
	}
	h2, err := f.history(ctx, first.Prefix, first.Chats)
	if err != nil {
		return nil, err
	}
	m.TurnsHistory = []HistoryState{h1, h2}
	if m.Consolidations, err = f.consolidations(ctx); err != nil {
		return nil, err
	}
	_, other2 := meter.stop()
	m.OtherCPUPercent = (other + other2) / 2
	m.TurnsFirst = first.Chats * first.TurnsPerChat
	m.TurnsAll = m.TurnsFirst + rest.Chats*rest.TurnsPerChat
	m.TurnSessions = c.TurnSessions
	for i, p := range f.procs {
		m.Procs[i].TurnsFirstRSSMB, m.Procs[i].TurnsAllRSSMB = rss1[i], rss2[i]
		m.Procs[i].TurnsRatio = rss2[i] / rss1[i]
		m.Procs[i].TurnsFirstAnonMB, m.Procs[i].TurnsAllAnonMB = anon1[i], anon2[i]
		if peak, err := memKB(p.Pid(), "VmHWM"); err == nil {
			m.Procs[i].PeakRSSMB = max(m.Procs[i].PeakRSSMB, mb(peak))
		}
	}
	if err := cmp.Or(errs...); err != nil {
		m.FirstError = err.Error()
	}
	if m.ElapsedS > 0 {
		m.TurnsPerS = float64(m.Turns) / m.ElapsedS
	}
	r.logf("  memory (%s): unconsolidated turns per session mean %.1f, max %d, %d consolidations pending after %d turns; mean %.1f, max %d, %d pending after %d; %d consolidations",
		shape, h1.MeanTurns, h1.MaxTurns, h1.Pending, m.TurnsFirst, h2.MeanTurns, h2.MaxTurns, h2.Pending, m.TurnsAll, m.Consolidations)
	for _, p := range m.Procs {
		r.logf("  memory (%s): %s %.2f KB per idle session; RSS %.1f MB after %d turns over %d sessions, %.2f× the %.1f MB after %d (anonymous %.1f → %.1f MB)",
			shape, p.Name, p.KBPerSession, p.TurnsAllRSSMB, m.TurnsAll, m.TurnSessions, p.TurnsRatio, p.TurnsFirstRSSMB, m.TurnsFirst, p.TurnsFirstAnonMB, p.TurnsAllAnonMB)
	}
	return m, nil
}

// slope is the least-squares slope of ys over xs (MB per session), 0 with
// fewer than two distinct xs.
func slope(xs []int, ys []float64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i, x := range xs {
		fx := float64(x)
		sx += fx
		sy += ys[i]
		sxx += fx * fx
		sxy += fx * ys[i]
	}
	d := n*sxx - sx*sx
	if len(xs) < 2 || d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}
