package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus/fleetstatustest"
	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/dashboard"
)

// TestCheckpointMarkersExpireOnACluster: on a 3-node cluster with every
// bucket replicated three times, a cleared checkpoint's purge marker (a
// message with a per-message TTL) expires like on a single server, so
// idle sessions leave nothing in the checkpoint bucket.
func TestCheckpointMarkersExpireOnACluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b := startCluster(t, bustest.ServerBinary(t), t.TempDir(), 3).connect(ctx, t)
	store, err := session.Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"cli:a", "cli:b"} {
		rev, err := store.SaveCheckpoint(ctx, key, &nanofleetv1.TurnCheckpoint{TurnId: "t", InboundSeq: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.ClearCheckpoint(ctx, key, rev); err != nil {
			t.Fatalf("clear checkpoint of %s: %v", key, err)
		}
	}
	stream, err := b.JS.Stream(ctx, "KV_"+b.Space.Bucket(bus.BucketCheckpoints))
	if err != nil {
		t.Fatal(err)
	}
	if r := stream.CachedInfo().Config.Replicas; r != 3 {
		t.Fatalf("checkpoint bucket has %d replicas, want 3", r)
	}
	bustest.WaitSubjects(t, stream, 0, 30*time.Second) // the test layout's TTL is 1 s
}

// TestStatusWithAStreamLeaderKilled: when the node leading the inbound
// stream is killed, the streams it led answer nobody until their
// replicas elect new leaders (measured: 6 s). The fleet's status (the CLI's
// `status`, the dashboard) still comes back within its time, naming
// those streams as unreadable and showing the others; it failed whole.
func TestStatusWithAStreamLeaderKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cluster := startCluster(t, bustest.ServerBinary(t), t.TempDir(), 3)
	all := cluster.connect(ctx, t)
	name := cluster.leaderOf(ctx, t, all, all.Space.InboundStream())
	leader := slices.IndexFunc(cluster.nodes, func(nd *node) bool { return nd.name == name })
	if leader < 0 {
		t.Fatalf("inbound stream led by %q, not a node of the cluster", name)
	}
	// The client talks to a node that stays up: a reconnect is another
	// event.
	b := connectTo(ctx, t, []*node{cluster.nodes[(leader+1)%3]})
	fleetstatustest.Online(t, b, fleetstatus.WorkerService, map[string]string{"instance": "w1"})

	cluster.nodes[leader].proc.Kill()
	sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
	defer scancel()
	st, err := fleetstatus.Get(sctx, b, 300*time.Millisecond)
	if err != nil {
		t.Fatalf("status with the inbound stream's leader killed: %v", err)
	}
	var names []string
	for _, s := range st.Streams {
		names = append(names, s.Name)
	}
	for _, u := range st.Unreadable {
		names = append(names, u.Stream)
		if u.Err == "" {
			t.Errorf("unreadable %s without a reason", u.Stream)
		}
	}
	want := []string{b.Space.InboundStream(), b.Space.OutboundStream(), b.Space.HistoryStream(), b.Space.MemoryStream(), b.Space.DeadLetterStream()}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("streams read or unreadable = %v, want each of %v once", names, want)
	}
	if st.Online(fleetstatus.WorkerService) != 1 {
		t.Errorf("services = %+v, want the worker", st.Services)
	}
	t.Logf("%d streams read; unreadable: %+v", len(st.Streams), st.Unreadable)
}

// TestDashboardWithAStreamLeaderKilled: with the node leading the inbound
// stream killed, the dashboard's snapshot names that stream as unreadable
// and still reads the history, led by a node that is up (as is the
// JetStream meta leader, which lists consumers). The status read was
// given the whole snapshot's time, so the history read after it found
// none left ("recent turns: context deadline exceeded").
func TestDashboardWithAStreamLeaderKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cluster := startCluster(t, bustest.ServerBinary(t), t.TempDir(), 3)
	all := cluster.connect(ctx, t)
	in, hist := all.Space.InboundStream(), all.Space.HistoryStream()
	meta, histLeader := cluster.metaLeader(ctx, t), cluster.leaderOf(ctx, t, all, hist)
	killed := slices.IndexFunc(cluster.nodes, func(nd *node) bool { return nd.name != meta && nd.name != histLeader })
	// The node to kill leads the inbound stream: step its leader down
	// towards it, one request at a time (each starts an election; sent
	// while one runs, they kept the stream leaderless and its info
	// unanswered), until it lands there.
	want := cluster.nodes[killed].name
	req, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": want}})
	stepDowns := 0
	for ; cluster.leaderOf(ctx, t, all, in) != want; stepDowns++ {
		if stepDowns == 5 {
			t.Fatalf("%s not led by %s after %d step-downs", in, want, stepDowns)
		}
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := all.NC.RequestWithContext(rctx, "$JS.API.STREAM.LEADER.STEPDOWN."+in, req)
		rcancel()
		if err != nil {
			t.Logf("step %s's leader down: %v", in, err)
		}
	}
	if l := cluster.leaderOf(ctx, t, all, hist); l == want {
		t.Fatalf("the history moved to the node to kill, %s", l)
	}
	b := connectTo(ctx, t, []*node{cluster.nodes[(killed+1)%3]})
	dash, err := dashboard.New(dashboard.Config{}, dashboard.Deps{Bus: b, Gate: openGate{}})
	if err != nil {
		t.Fatal(err)
	}

	// A turn in the history, for the snapshot to read.
	store, err := session.Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(ctx, "cli:direct", &nanofleetv1.TurnRecord{TurnId: "in1", Messages: []*nanofleetv1.ChatMessage{{Role: "user", Content: "hello"}}}, 0); err != nil {
		t.Fatal(err)
	}

	cluster.nodes[killed].proc.Kill()
	snap, err := dash.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s (meta leader %s, history led by %s, %d step-downs); problems: %q", cluster.nodes[killed].name, meta, histLeader, stepDowns, snap.Problems)
	if !slices.ContainsFunc(snap.Problems, func(p string) bool { return strings.HasPrefix(p, "no answer from "+in) }) {
		t.Errorf("problems do not name %s as unreadable", in)
	}
	for _, p := range snap.Problems {
		if strings.HasPrefix(p, "no answer from "+hist) || strings.HasPrefix(p, "recent turns:") || strings.HasPrefix(p, "token usage:") {
			t.Errorf("the history, led by a node that is up, was not read: %q", p)
		}
	}
	if len(snap.Turns) != 1 {
		t.Errorf("recent turns %+v, want the one in the history", snap.Turns)
	}
}

// leaderOf names the node leading stream, waiting while it has none (an
// election after a step-down) and asking again where an answer does not
// come.
func (c *natsCluster) leaderOf(ctx context.Context, t *testing.T, b *bus.Bus, stream string) string {
	t.Helper()
	var leader string
	bustest.Eventually(t, 30*time.Second, func() error {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		s, err := b.JS.Stream(sctx, stream)
		if err != nil {
			return fmt.Errorf("stream %s: %w", stream, err)
		}
		if leader = s.CachedInfo().Cluster.Leader; leader == "" {
			return fmt.Errorf("stream %s has no leader yet", stream)
		}
		return nil
	})
	return leader
}

// metaLeader names the JetStream meta leader, from the first node's
// monitoring endpoint.
func (c *natsCluster) metaLeader(ctx context.Context, t *testing.T) string {
	t.Helper()
	var leader string
	bustest.Eventually(t, 30*time.Second, func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/jsz", c.nodes[0].monitor), nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var jsz struct {
			Meta struct {
				Leader string `json:"leader"`
			} `json:"meta_cluster"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&jsz); err != nil {
			return err
		}
		if leader = jsz.Meta.Leader; leader == "" {
			return fmt.Errorf("no meta leader yet")
		}
		return nil
	})
	return leader
}

// openGate lets everyone in; the test reads snapshots directly.
type openGate struct{}

func (openGate) Authorized(*http.Request) bool { return true }

func (openGate) LogIn(http.ResponseWriter, *http.Request, string) bool { return true }
