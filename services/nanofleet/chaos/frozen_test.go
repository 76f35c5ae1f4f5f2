package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet/fleettest"
)

// TestTurnOutlivesAFrozenNode: the NATS node an agent-worker is connected
// to freezes (SIGSTOP: no FIN, no RST, as a hung VM or a node cut off the
// network) while the worker waits on the model. The worker must notice,
// move to another node and renew its lease there before the lease may
// expire (default 30 s TTL), so the turn answers with the model called
// once. With nats.go's default pings (every 2 minutes) the worker stayed
// on the frozen node, its renewals failed and the turn was abandoned.
func TestTurnOutlivesAFrozenNode(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	bins := fleettest.Build(t, "agent-worker")
	cluster := startCluster(t, bustest.ServerBinary(t), t.TempDir(), 3)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	b := cluster.connect(ctx, t)

	asked := make(chan struct{}, 4)
	release := make(chan struct{})
	model := llmtest.NewServer(t)
	model.Handle(func(*llmtest.RecordedRequest) llmtest.Reply {
		select {
		case asked <- struct{}{}:
		default: // a call beyond the first few: counted by the server all the same
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return llmtest.Text("answered")
	})
	cfg := fleettest.WriteConfig(t, map[string]any{
		"agents":    map[string]any{"defaults": map[string]any{"model": "fake-model"}},
		"providers": map[string]any{"custom": map[string]any{"apiKey": "frozen", "apiBase": model.URL()}},
		"nats":      map[string]any{"replicas": 3, "leaseTtlSeconds": 30},
		"tools":     map[string]any{"exec": map[string]any{"sandbox": "none"}},
	})
	worker := fleettest.Start(t, "agent-worker", bins.Path("agent-worker"), nil,
		"--nats", cluster.urls(), "--config", cfg, "--http", "", "--log-level", "info", "--workspace", t.TempDir(), "--id", "w1")
	worker.WaitOutput(t, "agent-worker running", time.Minute)

	// The lease bucket is watched through the other nodes.
	frozen := cluster.nodeOf(t, "agent-worker")
	others := slices.DeleteFunc(slices.Clone(cluster.nodes), func(nd *node) bool { return nd == frozen })
	watch := connectTo(ctx, t, others)
	kv, err := watch.KV(ctx, bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	updates, err := kv.WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = updates.Stop() }()
	written := make(chan jetstream.KeyValueEntry, 16) // the worker's lease writes, as they are seen
	go func() {
		for e := range updates.Updates() {
			if e != nil && e.Operation() == jetstream.KeyValuePut && strings.HasPrefix(string(e.Value()), "w1/") {
				written <- e
			}
		}
	}()

	if err := publish(ctx, b, 0, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-asked:
	case <-ctx.Done():
		t.Fatal("the model was never asked")
	}
	// The node freezes just before the worker's next renewal is due (it
	// renews every 10 s from its last write): the renewal then has the
	// least time left, 14 s, to reach the lease on another node.
	var wrote time.Time
	select {
	case <-written:
		wrote = time.Now()
	case <-ctx.Done():
		t.Fatal("no lease write seen")
	}
	select {
	case <-time.After(time.Until(wrote.Add(9500 * time.Millisecond))):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if err := frozen.proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = frozen.proc.Signal(syscall.SIGCONT) })
	start := time.Now()
	t.Logf("froze %s, the worker's node, %s after its last lease write", frozen.name, start.Sub(wrote).Round(time.Millisecond))

	// A renewal stored 15 s or more after the freeze went through another
	// node: nothing written to the frozen one is stored after the next
	// leader's election (a renewal it had replicated can show up then,
	// 4–10 s after the freeze), and a worker stuck on it gives up 14.5 s
	// after the freeze.
	for renewed := false; !renewed; {
		select {
		case e := <-written:
			t.Logf("lease %s renewed (revision %d, stored %s after the freeze) seen %s after the freeze", e.Key(), e.Revision(),
				e.Created().Sub(start).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
			renewed = time.Since(start) >= 15*time.Second
		case <-time.After(time.Until(start.Add(45 * time.Second))):
			t.Fatalf("no lease renewal stored 15–45 s after the freeze; the worker's log:\n%s", lastLines(worker.Output(), 20))
		}
	}
	close(release)

	bustest.Eventually(t, time.Minute, func() error {
		if n := readOutbound(ctx, t, watch).last[msgID(0, 0)]; n != 1 {
			return fmt.Errorf("%d last replies to %s, want 1", n, msgID(0, 0))
		}
		return nil
	})
	if n := model.RequestCount(); n != 1 {
		t.Errorf("model called %d times, want 1 (the turn was run again)", n)
	}
}

// nodeOf is the node the connections named name are connected to, from
// the nodes' /connz; it fails the test unless exactly one node has them
// (freezing one node must cut the process off).
func (c *natsCluster) nodeOf(t *testing.T, name string) *node {
	t.Helper()
	var found []*node
	for _, nd := range c.nodes {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/connz", nd.monitor))
		if err != nil {
			t.Fatalf("%s /connz: %v", nd.name, err)
		}
		var connz struct {
			Connections []struct {
				Name string `json:"name"`
			} `json:"connections"`
		}
		err = json.NewDecoder(resp.Body).Decode(&connz)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatalf("%s /connz: %v", nd.name, err)
		}
		for _, conn := range connz.Connections {
			if strings.HasPrefix(conn.Name, name) {
				found = append(found, nd)
				break
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d nodes have a connection named %s, want 1", len(found), name)
	}
	return found[0]
}

// connectTo connects a client, named for the test, to the cluster
// through the given nodes only: it does not move to another node when
// one of the others goes.
func connectTo(ctx context.Context, t *testing.T, nodes []*node) *bus.Bus {
	t.Helper()
	b, err := bus.Connect(ctx, bus.Config{URL: urlsOf(nodes), Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.NC.Close)
	return b
}
