package fleet_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet/fleettest"
)

// TestMultiProcessFleetSurvivesWorkerKill: a nats-server process, three
// agent-worker processes and a tool-runner process; 50 sessions × 10
// messages published at once against a model with latency; one worker is
// SIGKILLed mid-turn and a new one started. Every message gets exactly one
// final reply, and each session's messages reach the model in order.
func TestMultiProcessFleetSurvivesWorkerKill(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	const sessions, perSession = 50, 10
	bins := fleettest.Build(t, "agent-worker", "tool-runner")
	nats := fleettest.StartNATS(t, t.TempDir())
	b := nats.Connect(t, bustest.TestLayout())

	llm := llmtest.NewServer(t, llmtest.WithLatency(20*time.Millisecond))
	var mu sync.Mutex
	seen := map[string][]int{} // session → message numbers in the order the model saw them
	llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		var s string
		var n int
		if _, err := fmt.Sscanf(r.LastUserText(), "%s %d", &s, &n); err == nil {
			mu.Lock()
			seen[s] = append(seen[s], n)
			mu.Unlock()
		}
		return llmtest.Text("ack " + r.LastUserText())
	})
	cfgPath := fleettest.WriteConfig(t, testConfig(t, llm.URL(), nil))
	ws := t.TempDir()
	common := []string{"--nats", nats.URL, "--config", cfgPath, "--http", "", "--log-level", "warn"}
	fleettest.Start(t, "tool-runner", bins.Path("tool-runner"), nil, append(common, "--workspace", ws)...)
	var workers []*fleettest.Proc
	for i := range 3 {
		workers = append(workers, fleettest.Start(t, fmt.Sprint("worker-", i), bins.Path("agent-worker"), nil,
			append(common, "--id", fmt.Sprint("w", i), "--workspace", ws)...))
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	client, err := fleet.NewClient(ctx, b, "mp")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var pending []*fleet.Pending
	for i := range perSession {
		for s := range sessions {
			p, err := client.Send(ctx, fleet.Request{ChatID: fmt.Sprint("s", s), Text: fmt.Sprintf("s%d %d", s, i)})
			if err != nil {
				t.Fatal(err)
			}
			pending = append(pending, p)
		}
	}
	// Kill a worker once turns are flowing, then start a replacement.
	bustest.Eventually(t, time.Minute, func() error {
		if n := llm.RequestCount(); n < 60 {
			return fmt.Errorf("turns not flowing: the model saw %d requests", n)
		}
		return nil
	})
	atKill := llm.RequestCount()
	workers[0].Kill()
	fleettest.Start(t, "worker-3", bins.Path("agent-worker"), nil, append(common, "--id", "w3", "--workspace", ws)...)

	for _, p := range pending {
		replies, err := p.Wait(ctx)
		if err != nil {
			t.Fatalf("message %s: %v (model saw %d requests)", p.ID(), err, llm.RequestCount())
		}
		if len(replies) != 1 || replies[0].GetKind() != nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL {
			t.Fatalf("message %s: replies %v", p.ID(), replies)
		}
	}
	// Exactly one final reply per message in the outbound stream itself.
	finals := countFinals(t, b.JS, b.Space.OutboundStream())
	for _, p := range pending {
		if n := finals[p.ID()]; n != 1 {
			t.Errorf("message %s has %d final replies in the stream", p.ID(), n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for s := range sessions {
		key := fmt.Sprint("s", s)
		order := slices.Compact(slices.Clone(seen[key])) // a resumed turn asks the model again
		if len(order) != perSession || !slices.IsSorted(order) {
			t.Errorf("session %s: model saw messages in order %v", key, seen[key])
		}
	}
	t.Logf("model requests: %d for %d messages; worker-0 killed after %d requests", llm.RequestCount(), sessions*perSession, atKill)
	if llm.RequestCount() == sessions*perSession {
		t.Logf("worker-0 output:\n%s", workers[0].Output())
	}
}

// countFinals reads a whole stream and counts final replies per inbound id.
func countFinals(t *testing.T, js jetstream.JetStream, stream string) map[string]int {
	t.Helper()
	ctx := t.Context()
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := js.Stream(ctx, stream)
	info, _ := st.Info(ctx)
	out := map[string]int{}
	for read := uint64(0); read < info.State.Msgs; {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			o := &nanofleetv1.OutboundMessage{}
			if proto.Unmarshal(m.Data(), o) == nil && o.GetKind() == nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL {
				out[o.GetReplyTo()]++
			}
		}
		if n == 0 {
			break
		}
		read += uint64(n)
	}
	return out
}

// TestAllInOneRestartCompletesTheTurn: the all-in-one stopped mid-turn
// (killed, or by a second Ctrl-C, which does not wait for the turn) and
// started again on the same data directory completes the turn at once,
// not after its ack wait, and the history is intact. A turn killed after
// a tool step resumes from its checkpoint: the redelivery is counted as
// the message's second, so the model is not asked the first step again.
func TestAllInOneRestartCompletesTheTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	tests := []struct {
		name string
		stop func(t *testing.T, aio *fleettest.Proc)
		// ackWait is the worker's and leaseTTL the lease bucket's: a
		// killed process's turn, restored pending with the server, is
		// handed out again at the next start, and its lease taken over
		// under the same worker name; one stopped by two Ctrl-Cs is
		// handed back by the process. Either is taken well before its
		// 10 minutes' ack wait (the test waits one).
		ackWait, leaseTTL int
		// toolStep makes the turn's first model call a tool call, so
		// that it is killed after a checkpoint.
		toolStep bool
	}{
		{"killed", func(t *testing.T, aio *fleettest.Proc) { aio.Kill() }, 600, 30, false},
		{"killed after a tool step", func(t *testing.T, aio *fleettest.Proc) { aio.Kill() }, 600, 30, true},
		{"two Ctrl-Cs", func(t *testing.T, aio *fleettest.Proc) {
			_ = aio.Signal(syscall.SIGINT)
			aio.WaitOutput(t, "Ctrl-C again stops now", 30*time.Second)
			_ = aio.Signal(syscall.SIGINT)
			// The turn is held at the model until the test ends: only
			// the second Ctrl-C can end the process before that.
			if exited, _ := aio.Wait(30 * time.Second); !exited {
				t.Fatal("a second Ctrl-C did not stop the all-in-one while a turn ran")
			}
			aio.WaitOutput(t, "the running turns are handed back", time.Second)
		}, 600, 3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { restartCompletesTheTurn(t, tt.stop, tt.ackWait, tt.leaseTTL, tt.toolStep) })
	}
}

func restartCompletesTheTurn(t *testing.T, stop func(t *testing.T, aio *fleettest.Proc), ackWait, leaseTTL int, toolStep bool) {
	bins := fleettest.Build(t, "nanofleet")
	llm := llmtest.NewServer(t)
	release := make(chan struct{})
	atModel := make(chan struct{})
	var once sync.Once
	var firstSteps atomic.Int32 // model calls of the slow turn from its user message
	llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		if r.LastUserText() == "slow question" {
			if toolStep && r.LastMessage().Role != "tool" {
				firstSteps.Add(1)
				return llmtest.ToolCalls(llmtest.Call("list_dir", `{"path":"."}`))
			}
			first := false
			once.Do(func() { first = true; close(atModel) })
			if first {
				<-release // hold the first attempt until the process is dead
			}
			return llmtest.Text("answer to the slow question")
		}
		return llmtest.Text("ok")
	})
	defer close(release)
	home := t.TempDir()
	port := bustest.FreePort(t)
	cfg := testConfig(t, llm.URL(), map[string]any{"worker": map[string]any{"ackWaitSeconds": ackWait, "modelRetries": 2}})
	cfg["nats"] = map[string]any{"leaseTtlSeconds": leaseTTL, "port": port}
	cfgPath := fleettest.WriteConfig(t, cfg)
	args := []string{"run", "--config", cfgPath, "--data", home + "/data", "--workspace", home + "/ws", "--http", "", "--no-gateway", "--log-level", "warn"}
	env := []string{"NANOFLEET_HOME=" + home, "HOME=" + home}

	aio := fleettest.Start(t, "nanofleet", bins.Path("nanofleet"), env, args...)
	aio.WaitOutput(t, "nanofleet is running", 30*time.Second)
	nats := fleettest.FleetOn(t, home+"/data")
	b := nats.Connect(t, bustest.TestLayout())
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	client, err := fleet.NewClient(ctx, b, "cli")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Ask(ctx, fleet.Request{ChatID: "r", Text: "first"}); err != nil {
		t.Fatal(err)
	}
	p, err := client.Send(ctx, fleet.Request{ChatID: "r", Text: "slow question"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-atModel:
	case <-ctx.Done():
		t.Fatal("the slow question never reached the model")
	}
	// Killed before the server wrote the delivery down, the restart
	// would find the message never delivered and hand it out at once
	// whatever the fleet does: the case under test is the delivery on
	// disk, as after any kill more than a tenth of a second in.
	in, err := b.JS.Stream(ctx, b.Space.InboundStream())
	if err != nil {
		t.Fatal(err)
	}
	slowSeq := in.CachedInfo().State.LastSeq
	bustest.Eventually(t, 10*time.Second, func() error {
		return pendingOnDisk(home+"/data", b.Space.InboundStream(), b.Space.WorkerConsumer(), slowSeq)
	})
	client.Close()
	stop(t, aio)

	aio2 := fleettest.Start(t, "nanofleet-2", bins.Path("nanofleet"), env, args...)
	aio2.WaitOutput(t, "nanofleet is running", 30*time.Second)
	b2 := nats.Connect(t, bustest.TestLayout())
	_ = p
	// Wait for the reply of the interrupted turn in the outbound stream.
	var final *nanofleetv1.OutboundMessage
	bustest.Eventually(t, time.Minute, func() error {
		if final = lastReplies(t, b2.JS, b2.Space.OutboundStream())[p.ID()]; final == nil {
			return errors.New("no reply to the interrupted turn")
		}
		return nil
	})
	if final.GetContent() != "answer to the slow question" {
		t.Fatalf("interrupted turn's reply = %v", final)
	}
	if n := firstSteps.Load(); toolStep && n != 1 {
		t.Errorf("the model was asked the turn's first step %d times, want 1: the redelivered turn did not resume from its checkpoint", n)
	}
	out, err := runCLI(ctx, bins.Path("nanofleet"), env, "agent", "--nats", nats.URL, "--config", cfgPath, "--session", "cli:r", "-m", "/history 10")
	if err != nil {
		t.Fatalf("nanofleet agent: %v\n%s", err, out)
	}
	for _, want := range []string{"user: first", "user: slow question", "assistant: answer to the slow question"} {
		if !strings.Contains(out, want) {
			t.Errorf("history after restart lacks %q:\n%s", want, out)
		}
	}
	_ = aio2.Signal(syscall.SIGTERM)
	if exited, code := aio2.Wait(30 * time.Second); !exited || code != 0 {
		t.Errorf("all-in-one did not stop cleanly on SIGTERM: exited %v code %d", exited, code)
	}
}

// pendingOnDisk reports an error until the state file of the embedded
// server's consumer, as the server last wrote it, holds the delivery of
// stream sequence seq, not yet acknowledged. It reads nats-server 2.15's encoding (magic 22,
// version 2, then uvarints: ack floor consumer and stream sequences,
// delivered consumer and stream sequences, pending count) and says so
// when the file is in another.
func pendingOnDisk(dataDir, stream, consumer string, seq uint64) error {
	data, err := os.ReadFile(filepath.Join(dataDir, "jetstream", "jetstream", "$G", "streams", stream, "obs", consumer, "o.dat"))
	if err != nil {
		return err
	}
	if len(data) < 2 || data[0] != 22 || data[1] != 2 {
		return fmt.Errorf("consumer state in an unknown encoding: % x", data[:min(len(data), 8)])
	}
	rest := data[2:]
	var fields [5]uint64
	for i := range fields {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return fmt.Errorf("consumer state cut short at field %d", i)
		}
		fields[i], rest = v, rest[n:]
	}
	if ackFloor, delivered, pending := fields[1], fields[3], fields[4]; delivered < seq || ackFloor >= seq || pending == 0 {
		return fmt.Errorf("stream sequence %d not pending on disk yet (ack floor %d, delivered up to %d, %d pending)", seq, ackFloor, delivered, pending)
	}
	return nil
}
