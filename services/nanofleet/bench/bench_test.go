package bench

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sashabaranov/go-openai"

	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
)

func TestPercentiles(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	p := percentiles(ds)
	if p.P50 != 51 || p.P95 != 96 || p.P99 != 100 || p.Max != 100 || p.Mean != 50.5 {
		t.Errorf("percentiles = %+v", p)
	}
	if (percentiles(nil) != Percentiles{}) {
		t.Error("percentiles of nothing are not zero")
	}
}

func TestProcReaders(t *testing.T) {
	self := os.Getpid()
	if _, err := cpuTime(self); err != nil {
		t.Fatal(err)
	}
	rss, err := memKB(self, "VmRSS")
	if err != nil || rss <= 0 {
		t.Fatalf("VmRSS = %d, %v", rss, err)
	}
	if _, err := machineBusy(); err != nil {
		t.Fatal(err)
	}
	m := startCPU(self)
	for deadline := time.Now().Add(50 * time.Millisecond); time.Now().Before(deadline); {
	}
	own, other := m.stop()
	if len(own) != 1 || own[0] < 0 || other < 0 {
		t.Errorf("cpu meter: own %v, other %.1f%%", own, other)
	}
}

func TestLoadCountsTurnsAndErrors(t *testing.T) {
	boom := errors.New("boom")
	s := load{Concurrency: 3, Chats: 5, TurnsPerChat: 4, Prefix: "t"}.run(t.Context(), func(_ context.Context, chat string, n int) error {
		if chat == "t-2" && n == 1 {
			return boom
		}
		return nil
	})
	if len(s.Latencies) != 19 || s.Errors != 1 || !errors.Is(s.FirstErr, boom) {
		t.Errorf("load: %d latencies, %d errors, first %v", len(s.Latencies), s.Errors, s.FirstErr)
	}
}

// TestModelCallsATool: the fake model asks for read_file first and
// answers after the tool result, over real HTTP.
func TestModelCallsATool(t *testing.T) {
	m, err := startModel(0, true)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	post := func(body string) string {
		resp, err := http.Post(m.URL()+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return string(data)
	}
	if out := post(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`); !strings.Contains(out, `"read_file"`) {
		t.Errorf("first call: %s", out)
	}
	if out := post(`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"c","content":"x"}]}`); !strings.Contains(out, `"ok"`) {
		t.Errorf("second call: %s", out)
	}
}

func sampleReport() *Report {
	res := func(suite, name, shape string, workers, sessions int, latency, tps, p99 float64) Result {
		r := Result{Suite: suite, Name: name, Shape: shape, Workers: workers, SlotsPerWorker: 16, Sessions: sessions,
			ModelLatencyMs: latency, ModelCallsPerTurn: 1, TurnsPerS: tps, LatencyMs: Percentiles{P50: p99 / 2, P99: p99},
			Procs: []ProcStat{{Name: "p", PeakRSSMB: 30, CPUS: 1, CPUPercent: 50}}}
		if latency > 0 {
			r.IdealTurnsPerS = float64(min(sessions, workers*16)) / (latency / 1000)
		}
		return r
	}
	return &Report{
		Command: "go run . bench", Started: "2026-01-01T00:00:00Z", Machine: Machine{Cores: 2},
		Config: ConfigJSON{TurnsContextWindow: 8192, TurnsAnswerBytes: 2000},
		Scenarios: []Result{
			res(SuiteZero, "aio 0ms s=1", ShapeAllInOne, 1, 1, 0, 400, 8),
			res(SuiteZero, "aio 0ms s=100", ShapeAllInOne, 1, 100, 0, 900, 300),
			res(SuiteSlots, "aio 500ms s=1000", ShapeAllInOne, 1, 1000, 500, 480, 2500),
			res(SuiteWorkers, "mp w=1", ShapeMultiProcess, 1, 128, 500, 31, 4000),
			res(SuiteWorkers, "mp w=4", ShapeMultiProcess, 4, 128, 500, 124, 1100),
		},
		Idle: []IdleRSS{{Name: "agent-worker", RSSMB: 15}, {Name: "nanofleet (all-in-one)", RSSMB: 33}},
		Memory: []*Memory{
			{Shape: shapeAllInOne, TurnSessions: 100, TurnsFirst: 1000, TurnsAll: 100000, Consolidations: 24000,
				TurnsHistory: []HistoryState{{MeanTurns: 4.5, MaxTurns: 7}, {MeanTurns: 4.4, MaxTurns: 8, Pending: 3}}, Procs: []MemoryProc{
					{Name: "nanofleet", Service: true, SessionRSSMB: []float64{40, 60, 150}, KBPerSession: 2.3, TurnsFirstRSSMB: 40, TurnsAllRSSMB: 43, TurnsRatio: 1.075}}},
			{Shape: shapeMultiProcess, TurnSessions: 100, TurnsFirst: 1000, TurnsAll: 100000, Procs: []MemoryProc{
				{Name: "nats-server", SessionRSSMB: []float64{20, 30, 70}, KBPerSession: 1.1, TurnsFirstRSSMB: 20, TurnsAllRSSMB: 30, TurnsRatio: 1.5,
					TurnsFirstAnonMB: 8, TurnsAllAnonMB: 18},
				{Name: "agent-worker", Service: true, SessionRSSMB: []float64{15, 16, 20}, KBPerSession: 0.1, TurnsFirstRSSMB: 15, TurnsAllRSSMB: 18, TurnsRatio: 1.2}}},
		},
		Growth: []*Growth{
			{Shape: shapeAllInOne, FirstTurns: 1000, Turns: 100000, Sessions: 10000, Procs: []GrowthProc{
				{Name: "nanofleet", Service: true, RSSFirstMB: 40, RSSAllMB: 42, Ratio: 1.05}}},
			{Shape: shapeMultiProcess, FirstTurns: 1000, Turns: 100000, Sessions: 10000, Procs: []GrowthProc{
				{Name: "nats-server", RSSFirstMB: 20, RSSAllMB: 40, Ratio: 2},
				{Name: "agent-worker", Service: true, RSSFirstMB: 15, RSSAllMB: 18, Ratio: 1.2}}},
		},
	}
}

func TestMarkdownShowsTargets(t *testing.T) {
	md := Markdown(sampleReport())
	for _, want := range []string{
		"go run . bench", "≥ 1,000 turns/s | 900 turns/s (aio 0ms s=100) | **no**",
		"= 4.00× | yes", "agent-worker 15.0 MB | yes", "nanofleet 42.0 vs 40.0 MB = +5% | yes",
		"agent-worker 18.0 vs 15.0 MB = +20% | **no**", "| multi-process | nats-server | 20.0 | 40.0 | 2.00 |", "| aio 500ms s=1000 |",
		"all-in-one binary: resident cost of an idle session ≤ 2.50 KB per process | nanofleet 2.30 KB | yes",
		"multi-process: resident cost of an idle session ≤ 0.25 KB per process | agent-worker 0.10 KB | yes",
		"all-in-one binary: RSS after 100000 turns over 100 sessions within 10% of after 1000 | nanofleet 43.0 vs 40.0 MB = +7% | yes",
		"multi-process: RSS after 100000 turns over 100 sessions within 10% of after 1000 | agent-worker 18.0 vs 15.0 MB = +20% | **no**",
		"| multi-process | nats-server | 20.0 → 30.0 → 70.0 | 1.10 | 20.0 | 30.0 | 1.50 | 8.0 → 18.0 |",
		"| multi-process | agent-worker | 15.0 → 16.0 → 20.0 | 0.10 | 15.0 | 18.0 | 1.20 | – |",
		"with contextWindowTokens 8192, maxTokens 2048 and answers of 2000 bytes",
		"Unconsolidated turns per session (what a turn loads): mean 4.5, max 7, 0 consolidations pending after 1000 turns; mean 4.4, max 8, 3 pending after 100000; 24000 consolidations.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestPlotIsWellFormedSVG(t *testing.T) {
	for _, rep := range []*Report{sampleReport(), {}} {
		svg := Plot(rep)
		d := xml.NewDecoder(strings.NewReader(svg))
		for {
			_, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("SVG does not parse: %v\n%s", err, svg)
			}
		}
		if !strings.Contains(svg, "<polyline") && len(rep.Scenarios) > 0 {
			t.Error("no lines drawn")
		}
	}
}

func TestSlope(t *testing.T) {
	tests := []struct {
		name string
		xs   []int
		ys   []float64
		want float64
	}{
		{"line", []int{1000, 10000, 50000}, []float64{11, 20, 60}, 0.001},
		{"flat", []int{1000, 10000, 50000}, []float64{30, 30, 30}, 0},
		{"one point", []int{1000}, []float64{30}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := slope(tt.xs, tt.ys); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("slope = %g, want %g", got, tt.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.Suites = []string{"nope"}
	c.WorkerCounts = []int{0}
	c.MemorySessions = []int{10000, 1000}
	c.TurnsAll = c.TurnsFirst
	c.TurnsContextWindow = 1000
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "--suites") || !strings.Contains(err.Error(), "--workers") ||
		!strings.Contains(err.Error(), "--memory-sessions") || !strings.Contains(err.Error(), "--turns-all") ||
		!strings.Contains(err.Error(), "--turns-context-window") {
		t.Errorf("Validate = %v", err)
	}
}

// TestConversationModel: the memory suite's model answers a turn with
// text of the set length and a consolidation with a save_memory call, so
// that the consolidator gets a usable answer.
func TestConversationModel(t *testing.T) {
	model := conversationModel(2000)
	tests := []struct {
		name      string
		tools     []string
		wantText  int
		wantCalls []string
	}{
		{"turn", nil, 2000, nil},
		{"turn with tools", []string{"read_file", "exec"}, 2000, nil},
		{"consolidation", []string{"save_memory"}, 0, []string{"save_memory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &llmtest.RecordedRequest{}
			for _, name := range tt.tools {
				req.Tools = append(req.Tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{Name: name}})
			}
			reply := model(req)
			var calls []string
			for _, c := range reply.ToolCalls {
				calls = append(calls, c.Name)
				if !json.Valid([]byte(c.Arguments)) {
					t.Errorf("%s arguments are not JSON: %s", c.Name, c.Arguments)
				}
			}
			if len(reply.Content) != tt.wantText || !slices.Equal(calls, tt.wantCalls) {
				t.Errorf("reply: %d bytes of text, calls %v; want %d bytes, calls %v", len(reply.Content), calls, tt.wantText, tt.wantCalls)
			}
		})
	}
}
