package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/nanofleet/nanofleet/pkg/observe/observetest"
	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/storeguard"
	"github.com/nanofleet/nanofleet/pkg/storeguard/storeguardtest"
	"github.com/nanofleet/nanofleet/pkg/syncbuf"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

// apiFleet is a fleet with its gateway and the API's address and key.
type apiFleet struct {
	*fleet.Fleet
	base, key string
	logs      *syncbuf.Buffer
}

func startAPIFleet(t *testing.T, llm *llmtest.Server, dataDir string, minFree int64) *apiFleet {
	t.Helper()
	var mu sync.Mutex
	var lines []string
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	logs := &syncbuf.Buffer{}
	f, err := fleet.Start(ctx, fleet.Options{
		File: loadConfig(t, testConfig(t, llm.URL(), nil)), Getenv: func(string) string { return "" },
		DataDir: dataDir, Workspace: t.TempDir(), Gateway: true, GatewayListen: listenAddr(t),
		Announce:     func(l string) { mu.Lock(); lines = append(lines, l); mu.Unlock() },
		StoreMinFree: minFree,
	}, fleet.WithLogger(slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), logs), &slog.HandlerOptions{Level: slog.LevelInfo}))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	mu.Lock()
	all := strings.Join(lines, "\n")
	mu.Unlock()
	m := regexp.MustCompile(`API: (\S+) \(api key (\S+)\)`).FindStringSubmatch(all)
	if m == nil {
		t.Fatalf("no API announcement in %q", all)
	}
	return &apiFleet{Fleet: f, base: m[1], key: m[2], logs: logs}
}

// apiReply is one chat completion's status and body.
type apiReply struct {
	status int
	body   string
}

// ask posts a chat completion with body (JSON text, or built from the
// message) and returns what came back.
func (a *apiFleet) post(t *testing.T, method, path string, body []byte, header map[string]string) apiReply {
	t.Helper()
	r, err := a.send(t.Context(), method, path, body, header)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// send is post without the test: for a goroutine other than the test's,
// which must not call t.Fatal.
func (a *apiFleet) send(ctx context.Context, method, path string, body []byte, header map[string]string) (apiReply, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, bytes.NewReader(body))
	if err != nil {
		return apiReply{}, err
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return apiReply{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return apiReply{status: resp.StatusCode, body: string(data)}, nil
}

func chatBody(t *testing.T, user, text string) []byte {
	t.Helper()
	data, err := json.Marshal(map[string]any{"model": "nanofleet", "user": user,
		"messages": []map[string]string{{"role": "user", "content": text}}})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// answer is the content of a chat completion, or fails the test.
func answer(t *testing.T, r apiReply) string {
	t.Helper()
	var resp struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if r.status != http.StatusOK || json.Unmarshal([]byte(r.body), &resp) != nil || len(resp.Choices) != 1 {
		t.Fatalf("not an answer: %d %s", r.status, clip(r.body))
	}
	return resp.Choices[0].Message.Content
}

// apiErr is the OpenAI-shaped error in a reply, or fails the test.
func apiErr(t *testing.T, r apiReply) (message, code string) {
	t.Helper()
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.body), &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("status %d: not an OpenAI error: %s", r.status, clip(r.body))
	}
	c, _ := e.Error.Code.(string)
	return e.Error.Message, c
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// waitReady waits, bounded, until the fleet's readiness is as wanted and
// returns its last error.
func waitReady(t *testing.T, f *fleet.Fleet, ready bool, within time.Duration) error {
	t.Helper()
	var last error
	bustest.Eventually(t, within, func() error {
		last = f.Ready(t.Context())
		if (last == nil) != ready {
			return fmt.Errorf("readiness still %v (want ready %v)", last, ready)
		}
		return nil
	})
	return last
}

func readyz(t *testing.T, f *fleet.Fleet) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	observe.NewServer("", f.Registry, f.Ready).Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	return rec.Code, rec.Body.String()
}

// TestFullStoreFailsFastAndRecovers: the data directory sits on a small
// filesystem that fills up. New requests get "storage full" at once and
// /readyz says why; once space is freed the fleet answers again without a
// restart, and the turns committed before are all still there.
func TestFullStoreFailsFastAndRecovers(t *testing.T) {
	dataDir := storeguardtest.SmallFS(t, "64m")
	llm := answering(t, "ok: ")
	f := startAPIFleet(t, llm, dataDir, 4<<20)

	if got := answer(t, f.post(t, "POST", "/chat/completions", chatBody(t, "alice", "before"), nil)); got != "ok: before" {
		t.Fatalf("first answer %q", got)
	}
	ballast := filepath.Join(dataDir, "ballast")
	storeguardtest.Fill(t, ballast)
	err := waitReady(t, f.Fleet, false, 5*time.Second)
	if code, body := readyz(t, f.Fleet); code != http.StatusServiceUnavailable || !strings.Contains(body, "storage full") {
		t.Errorf("/readyz = %d %q, want 503 naming the full store (%v)", code, body, err)
	}
	if got := observetest.Gauge(t, f.Fleet.Registry, "nanofleet_storage_full"); got != 1 {
		t.Errorf("nanofleet_storage_full = %v while full", got)
	}
	if logs := f.logs.String(); !strings.Contains(logs, "storage full: new messages are refused") || !strings.Contains(logs, `full="the filesystem of `+dataDir) {
		t.Errorf("no log line saying what is full")
	}
	// A CLI joined to the fleet asks it over NATS.
	if err := fleet.JoinedStorage(t.Context(), f.Bus); !errors.Is(err, storeguard.ErrFull) || !strings.Contains(err.Error(), "storage full: the filesystem of "+dataDir) {
		t.Errorf("joined CLI's check while full: %v", err)
	}
	calls := llm.RequestCount()
	r := f.post(t, "POST", "/chat/completions", chatBody(t, "alice", "while full"), nil)
	msg, code := apiErr(t, r)
	// "At once": refused before it was stored ("not received"), not by a
	// turn that waited for a commit; the post's 30 s deadline guards a hang.
	if r.status != http.StatusInsufficientStorage || code != "storage_full" || !strings.Contains(strings.ToLower(msg), "storage full") ||
		!strings.Contains(msg, "not received") {
		t.Errorf("while full: %d %s", r.status, clip(r.body))
	}
	if n := llm.RequestCount(); n != calls {
		t.Errorf("%d model calls while full", n-calls)
	}
	// A write already on its way when the disk filled (here a turn record
	// of another session) fails in the server, and leaves the history
	// stream refusing writes until JetStream reopens it.
	pctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	_, err = f.Bus.JS.Publish(pctx, f.Bus.Space.History("api:other"), bytes.Repeat([]byte("x"), 64<<10))
	cancel()
	if err == nil {
		t.Fatal("a write to the full store succeeded")
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	waitReady(t, f.Fleet, true, 10*time.Second)
	if err := fleet.JoinedStorage(t.Context(), f.Bus); err != nil {
		t.Errorf("joined CLI's check once freed: %v", err)
	}
	if !strings.Contains(f.logs.String(), "storage recovered") {
		t.Errorf("no log line saying the store recovered")
	}
	if got := answer(t, f.post(t, "POST", "/chat/completions", chatBody(t, "alice", "after"), nil)); got != "ok: after" {
		t.Fatalf("answer after recovery %q", got)
	}
	store, err := session.Open(t.Context(), f.Bus)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := store.LoadHistory(t.Context(), "api:alice", 0)
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	for _, turn := range hist.Turns {
		said = append(said, turn.Record.GetMessages()[0].GetContent())
	}
	if fmt.Sprint(said) != "[before after]" {
		t.Errorf("history holds the user messages %q, want [before after]", said)
	}
	if err := f.Err(); err != nil {
		t.Errorf("a part of the fleet stopped: %v", err)
	}
}

// TestOversizeRequests: a message too large for the fleet is refused with
// 413 before anything is stored or any model is called, and the API's
// errors are OpenAI-shaped JSON.
func TestOversizeRequests(t *testing.T) {
	llm := llmtest.NewServer(t)
	llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply { return llmtest.Text("ok") })
	f := startAPIFleet(t, llm, t.TempDir(), 0)
	tests := []struct {
		name, method, path string
		body               []byte
		status             int
		code               string
	}{
		// The default context window is 200,000 tokens: about 800,000 bytes.
		{"900 KB message, above the context window", "POST", "/chat/completions", chatBody(t, "bob", strings.Repeat("c", 900<<10)), http.StatusRequestEntityTooLarge, "request_too_large"},
		{"3 MB message", "POST", "/chat/completions", chatBody(t, "bob", strings.Repeat("a", 3<<20)), http.StatusRequestEntityTooLarge, "request_too_large"},
		{"5 MB body", "POST", "/chat/completions", chatBody(t, "bob", strings.Repeat("b", 5<<20)), http.StatusRequestEntityTooLarge, "request_too_large"},
		{"wrong method", "GET", "/chat/completions", nil, http.StatusMethodNotAllowed, "method_not_allowed"},
		{"unknown path", "POST", "/nothing", nil, http.StatusNotFound, "unknown_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.post(t, tt.method, tt.path, tt.body, nil)
			if _, code := apiErr(t, r); r.status != tt.status || code != tt.code {
				t.Errorf("%d %s, want %d with code %s", r.status, clip(r.body), tt.status, tt.code)
			}
		})
	}
	if n := llm.RequestCount(); n != 0 {
		t.Errorf("%d model calls for refused requests", n)
	}
	if got := answer(t, f.post(t, "POST", "/chat/completions", chatBody(t, "bob", "small"), nil)); got != "ok" {
		t.Errorf("a small message after the refusals: %q", got)
	}
}

// TestTurnInFlightWhenTheStoreFills: a turn whose model answers after the
// store filled cannot commit; its request is told at once, and once space
// is freed the turn runs again and lands in the history.
func TestTurnInFlightWhenTheStoreFills(t *testing.T) {
	dataDir := storeguardtest.SmallFS(t, "64m")
	held := llmtest.Hold("in flight", llmtest.Text("late answer"), okScript)
	llm := llmtest.NewServer(t)
	llm.Handle(held.Script)
	f := startAPIFleet(t, llm, dataDir, 4<<20)
	type posted struct {
		apiReply
		err error
	}
	replies := make(chan posted, 1)
	body := chatBody(t, "carol", "in flight")
	go func() {
		r, err := f.send(t.Context(), "POST", "/chat/completions", body, nil)
		replies <- posted{r, err}
	}()
	bustest.Receive(t, held.Asked, 30*time.Second) // the turn reached the model
	ballast := filepath.Join(dataDir, "ballast")
	storeguardtest.Fill(t, ballast)
	waitReady(t, f.Fleet, false, 5*time.Second)
	held.Release()
	select {
	case r := <-replies:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if _, code := apiErr(t, r.apiReply); r.status != http.StatusInsufficientStorage || code != "storage_full" {
			t.Errorf("the waiting request got %d %s", r.status, clip(r.body))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting request was not answered within 10s of the store filling")
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	waitReady(t, f.Fleet, true, 10*time.Second)
	store, err := session.Open(t.Context(), f.Bus)
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 90*time.Second, func() error {
		hist, err := store.LoadHistory(t.Context(), "api:carol", 0)
		if err != nil || len(hist.Turns) != 1 {
			return fmt.Errorf("the turn is not in the history after space was freed (%v)", err)
		}
		msgs := hist.Turns[0].Record.GetMessages()
		if got := msgs[len(msgs)-1].GetContent(); got != "late answer" {
			t.Errorf("the turn committed with %q", got)
		}
		return nil
	})
	if got := answer(t, f.post(t, "POST", "/chat/completions", chatBody(t, "carol", "next"), nil)); got != "ok: next" {
		t.Errorf("next answer %q", got)
	}
	if err := f.Err(); err != nil {
		t.Errorf("a part of the fleet stopped: %v", err)
	}
}

// TestObjectStoreIsBounded: tools fill the object store at a model's will
// (read_file of an image, oversize output), and nothing removed what they
// stored: against the real all-in-one, one turn of twelve 15 MB images
// left a 192 MiB store full, refusing every user's messages. The
// all-in-one bounds it to a quarter of its store (at most 1 GiB) and
// keeps objects 7 days.
func TestObjectStoreIsBounded(t *testing.T) {
	f := startAPIFleet(t, answering(t, "ok: "), storeguardtest.SmallFS(t, "64m"), 4<<20)
	blobs, err := f.Bus.Blobs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	st, err := blobs.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_, limit, err := f.Embedded.StoreUsage()
	if err != nil {
		t.Fatal(err)
	}
	s, ok := st.(*jetstream.ObjectBucketStatus)
	if !ok {
		t.Fatalf("status %T", st)
	}
	if got := s.StreamInfo().Config.MaxBytes; limit <= 0 || got != limit/4 {
		t.Errorf("object store bound %d, want a quarter of the store's %d", got, limit)
	}
	if s.TTL() != 7*24*time.Hour {
		t.Errorf("objects kept %s, want 7 days", s.TTL())
	}
}

// okScript answers "ok: <last user text>".
func okScript(r *llmtest.RecordedRequest) llmtest.Reply {
	return llmtest.Text("ok: " + r.LastUserText())
}

// TestJoinedStorageWithoutAnAllInOne: services on an external NATS have no
// store guard to ask; a joined CLI sends as before.
func TestJoinedStorageWithoutAnAllInOne(t *testing.T) {
	if err := fleet.JoinedStorage(t.Context(), bustest.StartJetStream(t)); err != nil {
		t.Errorf("no all-in-one: %v, want nil", err)
	}
}

// TestJoinedStorageEndsWithCtx: the question is the caller's to end; an
// ended ctx asks nothing, so it does not hear a full store either.
func TestJoinedStorageEndsWithCtx(t *testing.T) {
	b := bustest.StartJetStream(t)
	sub, err := b.NC.Subscribe(b.Space.StorageState(), func(m *nats.Msg) { _ = m.Respond([]byte("storage full: test")) })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := fleet.JoinedStorage(t.Context(), b); !errors.Is(err, storeguard.ErrFull) {
		t.Fatalf("asked with a live ctx: %v, want ErrFull", err)
	}
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	if err := fleet.JoinedStorage(ended, b); err != nil {
		t.Errorf("asked with an ended ctx: %v, want nil (nothing asked)", err)
	}
}
