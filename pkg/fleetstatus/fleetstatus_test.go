package fleetstatus_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus/fleetstatustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func register(t *testing.T, b *bus.Bus, name, runner string) {
	t.Helper()
	fleetstatustest.Online(t, b, name, map[string]string{"runner": runner})
}

func TestGet(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx := ctxT(t)
	fleetstatustest.InFlight(t, b, 3)
	register(t, b, fleetstatus.WorkerService, "w1")
	register(t, b, fleetstatus.WorkerService, "w2")
	register(t, b, fleetstatus.ToolRunnerService, "r1")
	// r1's MCP server's tools: a service of the runner's name, not a runner.
	fleetstatustest.Online(t, b, fleetstatus.ToolRunnerService, map[string]string{"runner": "r1", fleetstatus.MCPServerKey: "memory"})

	// A client's reply consumer, as `nanofleet agent` makes one.
	client, err := b.JS.OrderedConsumer(ctx, b.Space.OutboundStream(), jetstream.OrderedConsumerConfig{InactiveThreshold: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	clientName := client.CachedInfo().Name

	st, err := fleetstatus.Get(ctx, b, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := st.Consumer(b.Space.OutboundStream(), clientName); !ok || !c.Ephemeral || c.InactiveThreshold != 30*time.Second {
		t.Errorf("client consumer = %+v, %v; want ephemeral, deleted 30s after the last pull", c, ok)
	}
	if len(st.Streams) != 5 {
		t.Errorf("streams = %+v, want the fleet's 5", st.Streams)
	}
	in, ok := st.Stream(b.Space.InboundStream())
	if !ok || in.Msgs != 3 || in.FirstSeq != 1 || in.LastSeq != 3 {
		t.Errorf("inbound stream = %+v, %v", in, ok)
	}
	c, ok := st.Consumer(b.Space.InboundStream(), b.Space.WorkerConsumer())
	if !ok || c.InFlight != 1 || c.Pending != 2 || c.Ephemeral {
		t.Errorf("workers consumer = %+v, %v; want durable, 1 in flight, 2 pending", c, ok)
	}
	if w, r := st.Online(fleetstatus.WorkerService), st.Online(fleetstatus.ToolRunnerService); w != 2 || r != 1 {
		t.Errorf("online: %d workers, %d tool runners; want 2 and 1", w, r)
	}
	for _, svc := range st.Services {
		if svc.Version != fleetstatustest.Version || svc.ID == "" || svc.Metadata["runner"] == "" {
			t.Errorf("service = %+v", svc)
		}
	}
}

// turn builds a turn record with one tool call answered after 40 ms and a
// turn that took 100 ms.
func turn(id string, at time.Time) *nanofleetv1.TurnRecord {
	ts := func(ms int) *timestamppb.Timestamp {
		return timestamppb.New(at.Add(time.Duration(ms) * time.Millisecond))
	}
	return &nanofleetv1.TurnRecord{
		TurnId: id, SessionKey: "web:abc",
		Messages: []*nanofleetv1.ChatMessage{
			{Role: "user", Content: "read  the\nnotes " + id, CreatedAt: ts(0)},
			{Role: "assistant", ToolCalls: []*nanofleetv1.ToolCall{{Id: "c1", Name: "read_file", ArgumentsJson: `{"path":"notes.md"}`}}, CreatedAt: ts(20)},
			{Role: "tool", ToolCallId: "c1", Name: "read_file", Content: "hello", CreatedAt: ts(60)},
			{Role: "assistant", Content: "The notes say hello.", CreatedAt: ts(90)},
		},
		Replies:     []*nanofleetv1.OutboundMessage{{Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, Content: "The notes say hello."}},
		CompletedAt: ts(100),
	}
}

func publishTurn(t *testing.T, b *bus.Bus, rec *nanofleetv1.TurnRecord) {
	t.Helper()
	data, err := proto.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.JS.Publish(ctxT(t), b.Space.History(rec.GetSessionKey()), data); err != nil {
		t.Fatal(err)
	}
}

func stream(t *testing.T, b *bus.Bus, name string) fleetstatus.Stream {
	t.Helper()
	st, err := fleetstatus.Get(ctxT(t), b, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := st.Stream(name)
	if !ok {
		t.Fatalf("no stream %s", name)
	}
	return s
}

func ids(turns []fleetstatus.Turn) string {
	var out []string
	for _, t := range turns {
		out = append(out, t.TurnID)
	}
	return strings.Join(out, ",")
}

func TestRecentTurns(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx := ctxT(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, id := range []string{"t1", "t2", "t3", "t4"} {
		publishTurn(t, b, turn(id, at))
	}
	recent := fleetstatus.NewRecentTurns(b.Space, 3)
	if err := recent.Update(ctx, b.Direct, stream(t, b, b.Space.HistoryStream())); err != nil {
		t.Fatal(err)
	}
	if got := ids(recent.Items()); got != "t4,t3,t2" {
		t.Fatalf("recent turns = %s, want the last three, newest first", got)
	}
	got := recent.Items()[0]
	want := fleetstatus.Turn{
		Seq: 4, TurnID: "t4", Session: "web:abc", Received: at, Completed: at.Add(100 * time.Millisecond), DurationMS: 100,
		User: "read the notes t4", Reply: "The notes say hello.",
		Tools: []fleetstatus.ToolCall{{ID: "c1", Name: "read_file", Args: `{"path":"notes.md"}`, Result: "hello", Answered: true, DurationMS: 40}},
	}
	if !equalTurn(got, want) {
		t.Errorf("summary\n got %+v\nwant %+v", got, want)
	}

	// New records are added, an undecodable one is named, the window
	// stays at three.
	publishTurn(t, b, turn("t5", at))
	if _, err := b.JS.Publish(ctx, b.Space.History("web:abc"), []byte{0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	if err := recent.Update(ctx, b.Direct, stream(t, b, b.Space.HistoryStream())); err != nil {
		t.Fatal(err)
	}
	items := recent.Items()
	if got := ids(items); got != ",t5,t4" || !strings.Contains(items[0].Problem, "undecodable") || items[0].Seq != 6 {
		t.Fatalf("after two more records: %s (%+v)", got, items[0])
	}

	// Records removed from the stream leave the list.
	hist, err := b.JS.Stream(ctx, b.Space.HistoryStream())
	if err != nil {
		t.Fatal(err)
	}
	if err := hist.Purge(ctx, jetstream.WithPurgeKeep(1)); err != nil {
		t.Fatal(err)
	}
	if err := recent.Update(ctx, b.Direct, stream(t, b, b.Space.HistoryStream())); err != nil {
		t.Fatal(err)
	}
	if n := len(recent.Items()); n != 1 {
		t.Errorf("after a purge keeping one record: %d items", n)
	}
}

func equalTurn(a, b fleetstatus.Turn) bool {
	if len(a.Tools) != len(b.Tools) {
		return false
	}
	for i := range a.Tools {
		if a.Tools[i] != b.Tools[i] {
			return false
		}
	}
	a.Tools, b.Tools = nil, nil
	return a.Received.Equal(b.Received) && a.Completed.Equal(b.Completed) &&
		a.Seq == b.Seq && a.TurnID == b.TurnID && a.Session == b.Session && a.DurationMS == b.DurationMS &&
		a.User == b.User && a.Reply == b.Reply && a.Failed == b.Failed && a.Problem == b.Problem
}

func TestSummarizeTurn(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name  string
		edit  func(*nanofleetv1.TurnRecord)
		check func(fleetstatus.Turn) bool
	}{
		{"error reply marks the turn failed", func(r *nanofleetv1.TurnRecord) {
			r.Replies = []*nanofleetv1.OutboundMessage{{Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR, Content: "model down"}}
		}, func(t fleetstatus.Turn) bool { return t.Failed && t.Reply == "model down" }},
		{"call without a result", func(r *nanofleetv1.TurnRecord) { r.Messages = r.Messages[:2] },
			func(t fleetstatus.Turn) bool {
				return len(t.Tools) == 1 && !t.Tools[0].Answered && t.Tools[0].DurationMS == 0
			}},
		{"no timestamps, no durations", func(r *nanofleetv1.TurnRecord) {
			r.CompletedAt = nil
			for _, m := range r.Messages {
				m.CreatedAt = nil
			}
		}, func(t fleetstatus.Turn) bool {
			return t.DurationMS == 0 && t.Tools[0].DurationMS == 0 && t.Received.IsZero()
		}},
		{"long texts are clipped", func(r *nanofleetv1.TurnRecord) { r.Messages[0].Content = strings.Repeat("é", 1000) },
			func(t fleetstatus.Turn) bool { return len([]rune(t.User)) == 200 && strings.HasSuffix(t.User, "…") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := turn("t", at)
			tt.edit(rec)
			if got := fleetstatus.SummarizeTurn(1, rec); !tt.check(got) {
				t.Errorf("summary = %+v", got)
			}
		})
	}
}

func TestRecentDeadLetters(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx := ctxT(t)
	recent := fleetstatus.NewRecentDeadLetters(b.Space, 5)
	if err := recent.Update(ctx, b.Direct, stream(t, b, b.Space.DeadLetterStream())); err != nil {
		t.Fatal(err)
	}
	if n := len(recent.Items()); n != 0 {
		t.Fatalf("%d dead letters in an empty stream", n)
	}
	err := b.DeadLetter(ctx, "inbound", bus.Letter{Subject: b.Space.Inbound("web", "c1"), Data: []byte("?"), StreamSeq: 7, Deliveries: 3, Reason: "decode envelope: bad"})
	if err != nil {
		t.Fatal(err)
	}
	if err := recent.Update(ctx, b.Direct, stream(t, b, b.Space.DeadLetterStream())); err != nil {
		t.Fatal(err)
	}
	items := recent.Items()
	if len(items) != 1 {
		t.Fatalf("dead letters = %+v", items)
	}
	if d := items[0]; d.Source != "inbound" || d.Reason != "decode envelope: bad" || d.Deliveries != 3 || d.Subject != "nanofleet.in.web.c1" || d.FailedAt.IsZero() {
		t.Errorf("dead letter = %+v", d)
	}
}
