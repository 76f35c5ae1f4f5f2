package observe_test

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nanofleet/nanofleet/pkg/observe"
)

// TestMetricNames pins the names, types and labels the dashboard and the
// alerting rules depend on.
func TestMetricNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := observe.NewMetrics(reg)

	tests := []struct {
		name   string
		typ    string
		labels []string
		touch  func()
	}{
		{"nanofleet_turns_total", "COUNTER", []string{"outcome"},
			func() { m.Turns.WithLabelValues(observe.OutcomeOK).Inc() }},
		{"nanofleet_turn_duration_seconds", "HISTOGRAM", nil,
			func() { m.TurnDuration.Observe(1.5) }},
		{"nanofleet_model_request_duration_seconds", "HISTOGRAM", []string{"model", "provider"},
			func() { m.ModelRequestDuration.WithLabelValues("openai", "gpt-4o").Observe(0.3) }},
		{"nanofleet_model_tokens_total", "COUNTER", []string{"kind", "model", "provider"},
			func() { m.ModelTokens.WithLabelValues("openai", "gpt-4o", observe.TokensPrompt).Add(120) }},
		{"nanofleet_tool_calls_total", "COUNTER", []string{"outcome", "tool"},
			func() { m.ToolCalls.WithLabelValues("exec", observe.OutcomeRefused).Inc() }},
		{"nanofleet_sandbox_refusals_total", "COUNTER", []string{"reason"},
			func() { m.SandboxRefusals.WithLabelValues("path_escape").Inc() }},
		{"nanofleet_consumer_pending", "GAUGE", []string{"consumer", "stream"},
			func() { m.ConsumerPending.WithLabelValues("NANOFLEET_IN", "workers").Set(7) }},
		{"nanofleet_lease_contention_total", "COUNTER", nil,
			func() { m.LeaseContention.Inc() }},
		{"nanofleet_redeliveries_total", "COUNTER", nil,
			func() { m.Redeliveries.Inc() }},
		{"nanofleet_dead_letters_total", "COUNTER", []string{"source"},
			func() { m.DeadLetters.WithLabelValues("inbound").Inc() }},
		{"nanofleet_delivery_retries_total", "COUNTER", []string{"channel"},
			func() { m.DeliveryRetries.WithLabelValues("telegram").Inc() }},
		{"nanofleet_http_connections_refused_total", "COUNTER", nil,
			func() { m.HTTPConnectionsRefused.Inc() }},
	}
	for _, tt := range tests {
		tt.touch()
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for i, f := range families {
		got[f.GetName()] = i
	}
	if len(got) != len(tests) {
		t.Errorf("registry holds %d families, want %d", len(got), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i, ok := got[tt.name]
			if !ok {
				t.Fatalf("%s not registered", tt.name)
			}
			f := families[i]
			if f.GetType().String() != tt.typ {
				t.Errorf("type %v, want %v", f.GetType(), tt.typ)
			}
			if f.GetHelp() == "" {
				t.Error("no help text")
			}
			var labels []string
			for _, l := range f.GetMetric()[0].GetLabel() {
				labels = append(labels, l.GetName())
			}
			if !slices.Equal(labels, tt.labels) {
				t.Errorf("labels %v, want %v", labels, tt.labels)
			}
		})
	}
}

func TestMetricValuesMove(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := observe.NewMetrics(reg)
	m.Turns.WithLabelValues(observe.OutcomeOK).Add(2)
	m.Turns.WithLabelValues(observe.OutcomeError).Inc()
	for _, d := range []float64{0.2, 3, 700} {
		m.TurnDuration.Observe(d)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var turns float64
	var (
		histCount uint64
		histSum   float64
		lastLE    float64
		lastCount uint64
	)
	for _, f := range families {
		switch f.GetName() {
		case "nanofleet_turns_total":
			for _, mm := range f.GetMetric() {
				turns += mm.GetCounter().GetValue()
			}
		case "nanofleet_turn_duration_seconds":
			h := f.GetMetric()[0].GetHistogram()
			histCount, histSum = h.GetSampleCount(), h.GetSampleSum()
			last := h.GetBucket()[len(h.GetBucket())-1]
			lastLE, lastCount = last.GetUpperBound(), last.GetCumulativeCount()
		}
	}
	if turns != 3 {
		t.Errorf("turns total %v, want 3", turns)
	}
	if histCount != 3 || histSum != 703.2 {
		t.Fatalf("turn duration histogram: %d samples summing to %v, want 3 summing to 703.2", histCount, histSum)
	}
	// 700 s is beyond the last bucket (600 s): only +Inf holds it.
	if lastLE != 600 || lastCount != 2 {
		t.Errorf("last bucket le=%v count=%d, want le=600 count=2", lastLE, lastCount)
	}
}

func TestNewMetricsRegistersOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	observe.NewMetrics(reg)
	defer func() {
		if recover() == nil {
			t.Fatal("second NewMetrics on the same registry did not panic")
		}
	}()
	observe.NewMetrics(reg)
}

func TestNewMetricsNilRegistry(t *testing.T) {
	m := observe.NewMetrics(nil)
	m.Turns.WithLabelValues(observe.OutcomeOK).Inc() // usable, just not exported
	reg := prometheus.NewRegistry()
	if err := reg.Register(m.Turns); err != nil {
		t.Fatalf("metrics from a nil registry should still be registrable: %v", err)
	}
}
