package fleet_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet/fleettest"
)

// TestMetricsMove drives turns through the fleet and checks that the
// turn, model and tool metrics move.
func TestMetricsMove(t *testing.T) {
	llm := llmtest.NewServer(t)
	tf := startFleet(t, llm, t.TempDir(), 1)
	llm.Enqueue(
		llmtest.ToolCalls(llmtest.Call("write_file", `{"path":"a.txt","content":"x"}`)),
		llmtest.ToolCalls(llmtest.Call("read_file", `{"path":"../../etc/passwd"}`)),
		llmtest.Text("done"),
	)
	ask(t, tf, "m1", "go")
	m := tf.Metrics
	// The turn is counted just after its reply is out.
	bustest.Eventually(t, 5*time.Second, func() error {
		if testutil.ToFloat64(m.Turns.WithLabelValues("ok")) < 1 {
			return errors.New("no turn counted")
		}
		return nil
	})
	checks := []struct {
		name string
		got  float64
		min  float64
	}{
		{"turns ok", testutil.ToFloat64(m.Turns.WithLabelValues("ok")), 1},
		{"turn duration samples", float64(testutil.CollectAndCount(m.TurnDuration)), 1},
		{"write_file ok", testutil.ToFloat64(m.ToolCalls.WithLabelValues("write_file", "ok")), 1},
		{"read_file denied", testutil.ToFloat64(m.ToolCalls.WithLabelValues("read_file", "denied")), 1},
		{"path escape refusals", testutil.ToFloat64(m.SandboxRefusals.WithLabelValues("path_escape")), 1},
	}
	for _, c := range checks {
		if c.got < c.min {
			t.Errorf("%s = %v, want >= %v", c.name, c.got, c.min)
		}
	}
	if sum, n := modelTime(tf); n < 3 || sum <= 0 {
		t.Errorf("model request duration: %d samples, %v s; want 3 samples", n, sum)
	}
}

// TestSIGTERMFinishesTheTurn: a worker told to stop mid-turn finishes the
// turn, then exits; the message is not redelivered.
func TestSIGTERMFinishesTheTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	bins := fleettest.Build(t, "agent-worker", "tool-runner")
	nats := fleettest.StartNATS(t, t.TempDir())
	b := nats.Connect(t, bustest.TestLayout())
	llm := llmtest.NewServer(t)
	atModel := make(chan struct{}, 1)
	llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		atModel <- struct{}{}
		return llmtest.Text("finished after SIGTERM").WithLatency(1500 * time.Millisecond)
	})
	cfgPath := fleettest.WriteConfig(t, testConfig(t, llm.URL(), nil))
	common := []string{"--nats", nats.URL, "--config", cfgPath, "--http", "", "--log-level", "info"}
	fleettest.Start(t, "tool-runner", bins.Path("tool-runner"), nil, append(common, "--workspace", t.TempDir())...)
	w := fleettest.Start(t, "worker", bins.Path("agent-worker"), nil, append(common, "--id", "w1")...)
	w.WaitOutput(t, "agent-worker running", 30*time.Second)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	client, err := fleet.NewClient(ctx, b, "sig")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	p, err := client.Send(ctx, fleet.Request{ChatID: "c", Text: "long question"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-atModel:
	case <-ctx.Done():
		t.Fatal("turn never reached the model")
	}
	if err := w.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	replies, err := p.Wait(ctx)
	if err != nil || len(replies) != 1 || replies[0].GetContent() != "finished after SIGTERM" {
		t.Fatalf("replies = %v, %v", replies, err)
	}
	if exited, code := w.Wait(30 * time.Second); !exited || code != 0 {
		t.Fatalf("worker after SIGTERM: exited %v, code %d\n%s", exited, code, w.Output())
	}
	cons, err := b.JS.Consumer(ctx, b.Space.InboundStream(), b.Space.WorkerConsumer())
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 || info.NumRedelivered != 0 || info.NumPending != 0 {
		t.Errorf("consumer after shutdown: %d in flight, %d redelivered, %d pending", info.NumAckPending, info.NumRedelivered, info.NumPending)
	}
	if n := llm.RequestCount(); n != 1 {
		t.Errorf("model asked %d times, want 1", n)
	}
}
