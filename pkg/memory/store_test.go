package memory_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/agenttool"
	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/session"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

func setup(t *testing.T) *bus.Bus {
	t.Helper()
	b := bustest.StartJetStream(t)
	if err := bus.Provision(t.Context(), b, bustest.TestLayout(), memory.Assets); err != nil {
		t.Fatal(err)
	}
	return b
}

func newStore(t *testing.T, b *bus.Bus, cfg memory.Config) *memory.Store {
	t.Helper()
	s, err := memory.New(t.Context(), cfg, b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func inbound(channel, chat, sender, text string) *nanofleetv1.InboundMessage {
	return &nanofleetv1.InboundMessage{Channel: channel, ChatId: chat, SenderId: sender, Content: text}
}

func record(id, user, assistant string) *nanofleetv1.TurnRecord {
	return &nanofleetv1.TurnRecord{TurnId: id, Messages: []*nanofleetv1.ChatMessage{
		{Role: "user", Content: user}, {Role: "assistant", Content: assistant},
	}}
}

// requests drains the consolidation requests published so far.
func requests(t *testing.T, b *bus.Bus) []*nanofleetv1.ConsolidationRequest {
	t.Helper()
	ctx := t.Context()
	st, err := b.JS.Stream(ctx, b.Space.MemoryStream())
	if err != nil {
		t.Fatal(err)
	}
	info, _ := st.Info(ctx)
	var out []*nanofleetv1.ConsolidationRequest
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		r := &nanofleetv1.ConsolidationRequest{}
		if err := proto.Unmarshal(m.Data, r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func TestAfterTurnRequestsOldestTurns(t *testing.T) {
	ctx := t.Context()
	b := setup(t)
	st := newStore(t, b, memory.Config{})
	sessions, err := session.Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	const key = "cli:1"
	in := inbound("cli", "1", "u", "hi")
	hist := &session.History{}
	text := strings.Repeat("x", 384) // 100 tokens per message, 200 per turn
	for i := range 10 {
		seq, err := sessions.Append(ctx, key, record(fmt.Sprint("t", i), text, text), hist.LastSeq)
		if err != nil {
			t.Fatal(err)
		}
		hist.LastSeq = seq
		hist.Turns = append(hist.Turns, session.Turn{Seq: seq, Record: record(fmt.Sprint("t", i), text, text)})
		// Budget 2000: share 1000 = five turns.
		if err := st.AfterTurn(ctx, in, key, "cli:u", &nanofleetv1.SessionInfo{SessionKey: key}, hist, 2000); err != nil {
			t.Fatal(err)
		}
	}
	reqs := requests(t, b)
	if len(reqs) == 0 {
		t.Fatal("no consolidation requested")
	}
	first := reqs[0]
	// Six turns (1200) exceed the share; turns go until at most 500 remain:
	// the oldest four.
	if first.FromSeq != 1 || first.ToSeq != hist.Turns[3].Seq || first.Reason != memory.ReasonBudget || first.Scope != memory.AgentScope("default").Key() || first.Payer != "cli:u" {
		t.Fatalf("first request = %v", first)
	}
	// While that request is outstanding (the cursor has not passed it),
	// the later turns ask for nothing more.
	if len(reqs) != 1 {
		t.Errorf("%d requests while the first was outstanding, want 1: %v", len(reqs), reqs)
	}
	// Once the consolidator moved the cursor past it, the next turn asks
	// for the rest.
	done := &nanofleetv1.SessionInfo{SessionKey: key, ConsolidatedSeq: first.ToSeq}
	if err := st.AfterTurn(ctx, in, key, "cli:u", done, &session.History{Turns: hist.Turns[4:], LastSeq: hist.LastSeq}, 2000); err != nil {
		t.Fatal(err)
	}
	reqs = requests(t, b)
	if next := reqs[len(reqs)-1]; len(reqs) != 2 || next.FromSeq != first.ToSeq+1 || next.ToSeq <= first.ToSeq {
		t.Fatalf("after the cursor moved: requests %v, want a second from %d", reqs, first.ToSeq+1)
	}
	// The same range is asked once however often AfterTurn runs.
	before := len(reqs)
	if err := st.AfterTurn(ctx, in, key, "cli:u", &nanofleetv1.SessionInfo{SessionKey: key}, hist, 2000); err != nil {
		t.Fatal(err)
	}
	if n := len(requests(t, b)); n != before {
		t.Errorf("repeated AfterTurn published %d more", n-before)
	}
	// Archive asks for everything after the cursor.
	if err := st.Archive(ctx, in, key, "cli:u", &nanofleetv1.SessionInfo{SessionKey: key, ConsolidatedSeq: 3}, hist.LastSeq); err != nil {
		t.Fatal(err)
	}
	all := requests(t, b)
	last := all[len(all)-1]
	if last.FromSeq != 4 || last.ToSeq != hist.LastSeq || last.Reason != memory.ReasonNew || last.Payer != "cli:u" {
		t.Errorf("archive request = %v", last)
	}
}

func TestContextPerUserScope(t *testing.T) {
	ctx := t.Context()
	b := setup(t)
	st := newStore(t, b, memory.Config{Scope: memory.KindUser})
	docs, err := memory.OpenDocs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Links().Link(ctx, "telegram", "123", "ada"); err != nil {
		t.Fatal(err)
	}
	if err := st.Links().Link(ctx, "slack", "U456", "ada"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := docs.SetContent(ctx, memory.UserScope("default", "ada"), "Ada likes tea.", "operator"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := docs.SetContent(ctx, memory.UserScope("default", "telegram:999"), "Bob likes coffee.", "operator"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in         *nanofleetv1.InboundMessage
		want, dont string
	}{
		{inbound("telegram", "123", "123", "hi"), "Ada likes tea.", "Bob"},
		{inbound("slack", "D1", "U456", "hi"), "Ada likes tea.", "Bob"},
		{inbound("telegram", "999", "999", "hi"), "Bob likes coffee.", "Ada"},
		{&nanofleetv1.InboundMessage{Channel: "telegram", ChatId: "-100", SenderId: "123", Metadata: map[string]string{"chat_type": "group"}}, "", "likes"},
	}
	for _, tt := range tests {
		got, err := st.Context(ctx, tt.in, tt.in.Channel+":"+tt.in.ChatId)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(got, tt.want) || strings.Contains(got, tt.dont) {
			t.Errorf("Context for %s:%s = %q; want %q and not %q", tt.in.Channel, tt.in.SenderId, got, tt.want, tt.dont)
		}
	}
	if err := st.Links().Unlink(ctx, "slack", "U456"); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Context(ctx, inbound("slack", "D1", "U456", "hi"), "slack:D1"); strings.Contains(got, "Ada") {
		t.Errorf("unlinked sender still sees Ada's memory: %q", got)
	}
	links, err := st.Links().List(ctx)
	if err != nil || len(links) != 1 || links[0].Person != "ada" || links[0].Channel != "telegram" {
		t.Errorf("links = %v, %v", links, err)
	}
}

func TestLogAppendIsConditional(t *testing.T) {
	ctx := t.Context()
	b := setup(t)
	l := memory.OpenLog(b)
	agent, user := memory.AgentScope("default"), memory.UserScope("default", "ada")
	e1 := &nanofleetv1.HistoryEntry{SessionKey: "cli:1", Scope: agent.Key(), FromSeq: 1, ToSeq: 4, Text: "[2026-01-01 10:00] Ada said she lives in Lisbon."}
	seq1, err := l.Append(ctx, e1, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A second writer that did not see e1 fails, in any scope.
	dup := proto.Clone(e1).(*nanofleetv1.HistoryEntry)
	dup.Scope = user.Key()
	if _, err := l.Append(ctx, dup, 0); !errors.Is(err, memory.ErrConflict) {
		t.Fatalf("stale append: %v, want ErrConflict", err)
	}
	// Another session is independent.
	if _, err := l.Append(ctx, &nanofleetv1.HistoryEntry{SessionKey: "cli:2", Scope: agent.Key(), FromSeq: 2, ToSeq: 3, Text: "Bob asked about Lisbon trains."}, 0); err != nil {
		t.Fatal(err)
	}
	e2 := &nanofleetv1.HistoryEntry{SessionKey: "cli:1", Scope: user.Key(), FromSeq: 5, ToSeq: 9, Text: "Ada moved to Porto."}
	seq2, err := l.Append(ctx, e2, seq1)
	if err != nil {
		t.Fatal(err)
	}
	last, err := l.Last(ctx, "cli:1")
	if err != nil || last == nil || last.Seq != seq2 || last.GetToSeq() != 9 {
		t.Fatalf("Last = %v, %v", last, err)
	}
	if none, err := l.Last(ctx, "cli:none"); err != nil || none != nil {
		t.Errorf("Last of unknown session = %v, %v", none, err)
	}
	hits, err := l.Search(ctx, agent, "lisbon", 10, 0)
	if err != nil || len(hits) != 2 || hits[0].GetSessionKey() != "cli:2" {
		t.Fatalf("search lisbon = %v, %v", hits, err)
	}
	hits, err = l.Search(ctx, agent, "Ada Lisbon", 10, 0)
	if err != nil || len(hits) != 2 || hits[0].GetSessionKey() != "cli:1" {
		t.Fatalf("search 'Ada Lisbon' ranks the full match first: %v, %v", hits, err)
	}
	if hits, _ := l.Search(ctx, user, "lisbon", 10, 0); len(hits) != 0 {
		t.Errorf("user scope search found agent entries: %v", hits)
	}
}

func TestReadTurnsIgnoresReset(t *testing.T) {
	ctx := t.Context()
	b := setup(t)
	sessions, _ := session.Open(ctx, b)
	var last uint64
	for _, rec := range []*nanofleetv1.TurnRecord{record("a", "one", "1"), record("b", "two", "2"), {TurnId: "r", ClearsHistory: true}, record("c", "three", "3")} {
		seq, err := sessions.Append(ctx, "cli:r", rec, last)
		if err != nil {
			t.Fatal(err)
		}
		last = seq
	}
	turns, err := memory.ReadTurns(ctx, b, "cli:r", 1, 2)
	if err != nil || len(turns) != 2 || turns[1].Record.TurnId != "b" {
		t.Fatalf("ReadTurns(1, 2) = %v, %v", turns, err)
	}
}

func TestRevisionsListAndRestore(t *testing.T) {
	ctx := t.Context()
	b := setup(t)
	revs, err := memory.OpenRevisions(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := memory.OpenDocs(ctx, b)
	sc := memory.AgentScope("default")
	if _, _, err := docs.SetContent(ctx, sc, "v1", "consolidation"); err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for i, content := range []string{"v2", "v3"} {
		before, _, err := docs.SetContent(ctx, sc, content, "dream")
		if err != nil {
			t.Fatal(err)
		}
		seq, err := revs.Append(ctx, &nanofleetv1.MemoryRevision{Agent: "default", Scope: sc.Key(), Kind: memory.RevisionDream, Summary: fmt.Sprint("run ", i),
			Changes: []*nanofleetv1.FileChange{{Bucket: memory.ChangeMemory, Key: memory.DocKey(sc), Name: "MEMORY.md", Before: before, After: content}}}, "")
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
		// Another scope's revision in between.
		if _, err := revs.Append(ctx, &nanofleetv1.MemoryRevision{Agent: "default", Scope: memory.UserScope("default", "x").Key(), Kind: memory.RevisionDream}, ""); err != nil {
			t.Fatal(err)
		}
	}
	list, err := revs.List(ctx, []memory.Scope{sc}, 10)
	if err != nil || len(list) != 2 || list[0].Seq != seqs[1] || list[1].Seq != seqs[0] {
		t.Fatalf("List = %v, %v", list, err)
	}
	if _, err := revs.Restore(ctx, seqs[1], func(s memory.Scope) bool { return s != sc }); !errors.Is(err, memory.ErrForbidden) {
		t.Fatalf("restore outside scope: %v", err)
	}
	r, err := revs.Restore(ctx, seqs[1], nil)
	if err != nil {
		t.Fatal(err)
	}
	doc, _, _ := docs.Get(ctx, sc)
	if doc.Content != "v2" || r.Kind != memory.RevisionRestore || r.Changes[0].Before != "v3" {
		t.Fatalf("after restore: content %q, revision %v", doc.Content, r)
	}
	// The restore is itself undoable.
	if _, err := revs.Restore(ctx, r.Seq, nil); err != nil {
		t.Fatal(err)
	}
	if doc, _, _ := docs.Get(ctx, sc); doc.Content != "v3" {
		t.Fatalf("undo of restore: %q", doc.Content)
	}
}

func TestToolsAndCommands(t *testing.T) {
	ctx := t.Context()
	b := setup(t)
	st := newStore(t, b, memory.Config{})
	l := memory.OpenLog(b)
	sc := memory.AgentScope("default")
	for i, text := range []string{"Ada adopted a cat named Miso.", "Ada's cat Miso is ill.", "Talked about trains."} {
		if _, err := l.Append(ctx, &nanofleetv1.HistoryEntry{SessionKey: fmt.Sprint("cli:", i), Scope: sc.Key(), FromSeq: 1, ToSeq: 2, Text: text, CreatedAt: nil}, 0); err != nil {
			t.Fatal(err)
		}
	}
	tc := &agenttool.TurnContext{SessionKey: "cli:x", Inbound: inbound("cli", "x", "u", "")}
	tool := st.Tools()[0]
	if tool.Tool().Name != "memory_search" {
		t.Fatal(tool.Tool().Name)
	}
	out, err := tool.Call(ctx, tc, map[string]any{"query": "miso", "limit": int64(5)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "2 history entries") || strings.Index(out, "is ill") > strings.Index(out, "adopted") {
		t.Errorf("search output = %q", out)
	}
	cmds := st.Commands()
	out, err = cmds[0].Run(ctx, tc, nil)
	if err != nil || !strings.Contains(out, "No memory revisions") {
		t.Errorf("/dream-log = %q, %v", out, err)
	}
	out, err = cmds[1].Run(ctx, tc, []string{"99"})
	if err != nil || !strings.Contains(out, "no revision #99") {
		t.Errorf("/dream-restore 99 = %q, %v", out, err)
	}
}
