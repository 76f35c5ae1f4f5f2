package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	openai "github.com/sashabaranov/go-openai"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

// TTFT is what the time-to-first-token suite measured for one client and
// number of sessions: the time from the model flushing its first content
// chunk to that content reaching the client, which is what the fleet adds
// to the model's own time to first token.
type TTFT struct {
	Client   string `json:"client"`
	Sessions int    `json:"sessions"`
	Turns    int    `json:"turns"`
	Errors   int    `json:"errors"`
	// FirstError is the first failure, if any.
	FirstError string      `json:"first_error,omitempty"`
	AddedMs    Percentiles `json:"added_ms"`
	// OtherCPUPercent is the CPU the rest of the machine used meanwhile.
	OtherCPUPercent float64 `json:"other_cpu_pct"`
}

// TTFT clients.
const (
	ClientAPI     = "API stream (OpenAI client)"
	ClientWebChat = "web chat WebSocket"
)

// streamModel is a fake OpenAI-compatible model that streams its answers:
// the role, a first content chunk, then after rest the remainder. It
// records when it flushed each turn's first content chunk, by the turn's
// marker (a word of the user's message). Requests without streaming get
// a plain answer.
type streamModel struct {
	srv  *http.Server
	url  string
	rest time.Duration

	mu    sync.Mutex
	first map[string]time.Time
}

var markerRE = regexp.MustCompile(`ttft-[a-z]+-[0-9]+-[0-9]+`)

func startStreamModel(rest time.Duration) (*streamModel, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m := &streamModel{rest: rest, first: map[string]time.Time{}, url: "http://" + ln.Addr().String() + "/v1"}
	m.srv = &http.Server{Handler: http.HandlerFunc(m.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

func (m *streamModel) Close() { _ = m.srv.Close() }

// firstAt returns when the marker's first chunk was flushed.
func (m *streamModel) firstAt(marker string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.first[marker]
	return t, ok
}

func (m *streamModel) serve(w http.ResponseWriter, r *http.Request) {
	var req openai.ChatCompletionRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	marker := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == openai.ChatMessageRoleUser {
			marker = markerRE.FindString(req.Messages[i].Content)
			break
		}
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	send := func(delta string, finish string) {
		fr := "null"
		if finish != "" {
			fr = `"` + finish + `"`
		}
		fmt.Fprintf(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"model\":\"fake\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, fr)
		if flusher != nil {
			flusher.Flush()
		}
	}
	send(`{"role":"assistant","content":""}`, "")
	// Stamped before the write: the client may read the chunk before
	// this goroutine runs again.
	if marker != "" {
		m.mu.Lock()
		m.first[marker] = time.Now()
		m.mu.Unlock()
	}
	send(`{"content":"Hello"}`, "")
	if backoff.Sleep(r.Context(), m.rest) != nil {
		return
	}
	send(`{"content":", world."}`, "")
	send(`{}`, "stop")
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		_, _ = io.WriteString(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"model\":\"fake\",\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\n")
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

// ttft runs the suite: the all-in-one in this process with its gateway,
// the streaming fake model, and for each client and number of sessions,
// that many clients each sending TTFTTurns messages one after another.
func (r *driver) ttft(ctx context.Context) ([]TTFT, error) {
	dir, err := os.MkdirTemp(r.tmp, "ttft-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	model, err := startStreamModel(r.cfg.TTFTRest)
	if err != nil {
		return nil, err
	}
	defer model.Close()
	ws, err := prepareWorkspace(dir)
	if err != nil {
		return nil, err
	}
	_, file, err := fleetSettings{modelURL: model.url}.write(dir)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var lines []string
	f, err := fleet.Start(ctx, fleet.Options{
		File: file, Getenv: noEnv, DataDir: filepath.Join(dir, "data"), Workspace: ws,
		Gateway: true, GatewayListen: fmt.Sprintf("127.0.0.1:%d", port),
		Announce: func(l string) { mu.Lock(); lines = append(lines, l); mu.Unlock() },
	}, fleet.WithLogger(r.fleetLog))
	if err != nil {
		return nil, fmt.Errorf("start all-in-one: %w", err)
	}
	defer f.Stop()
	mu.Lock()
	announced := strings.Join(lines, "\n")
	mu.Unlock()
	api := regexp.MustCompile(`API: (\S+) \(api key (\S+)\)`).FindStringSubmatch(announced)
	web := regexp.MustCompile(`web chat: (\S+)`).FindStringSubmatch(announced)
	if api == nil || web == nil {
		return nil, fmt.Errorf("the gateway did not announce the API and the web chat: %q", announced)
	}
	cfg := openai.DefaultConfig(api[2])
	cfg.BaseURL = api[1]
	cfg.HTTPClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}
	apiClient := openai.NewClientWithConfig(cfg)

	clients := []struct {
		name string
		turn func(ctx context.Context, session int, marker string) (time.Time, error)
	}{
		{ClientAPI, func(ctx context.Context, session int, marker string) (time.Time, error) {
			return apiTurn(ctx, apiClient, session, marker)
		}},
		{ClientWebChat, nil}, // one connection per session, set up per run
	}
	var out []TTFT
	for _, c := range clients {
		for _, n := range r.cfg.TTFTSessions {
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			kind := "api"
			turn := c.turn
			var closers []func()
			if c.name == ClientWebChat {
				kind = "web"
				conns, err := openWebChats(ctx, web[1], n)
				if err != nil {
					return out, fmt.Errorf("web chat: %w", err)
				}
				for _, w := range conns {
					closers = append(closers, w.close)
				}
				turn = func(ctx context.Context, session int, marker string) (time.Time, error) {
					return conns[session].turn(ctx, marker)
				}
			}
			res := r.ttftRun(ctx, model, c.name, kind, n, turn)
			for _, cl := range closers {
				cl()
			}
			r.logf("  ttft %-28s s=%-4d added p50 %6.2f ms  p99 %6.2f ms  errors %d  others' CPU %.0f%%",
				res.Client, res.Sessions, res.AddedMs.P50, res.AddedMs.P99, res.Errors, res.OtherCPUPercent)
			out = append(out, res)
		}
	}
	return out, nil
}

// ttftRun runs n sessions of TTFTTurns turns (more when that is under 200
// turns in all) through turn and collects the added time to first token.
func (r *driver) ttftRun(ctx context.Context, model *streamModel, client, kind string, n int,
	turn func(ctx context.Context, session int, marker string) (time.Time, error),
) TTFT {
	res := TTFT{Client: client, Sessions: n}
	var mu sync.Mutex
	var added []time.Duration
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		res.Errors++
		if firstErr == nil {
			firstErr = err
		}
	}
	// One warm-up turn per session, not measured: connections and the
	// sessions' first history reads.
	meter := (*cpuMeter)(nil)
	var wg sync.WaitGroup
	// At least 200 measured turns, so that one session's p99 is not the
	// largest of a handful.
	rounds := max(r.cfg.TTFTTurns, (200+n-1)/n)
	for round := range rounds + 1 {
		if round == 1 {
			meter = startCPU(os.Getpid())
		}
		for s := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				marker := fmt.Sprintf("ttft-%s-%d-%d", kind, n*1000+s, round)
				tctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				got, err := turn(tctx, s, marker)
				if err != nil {
					fail(fmt.Errorf("%s: %w", marker, err))
					return
				}
				sent, ok := model.firstAt(marker)
				if !ok {
					fail(fmt.Errorf("%s: the model never streamed it", marker))
					return
				}
				if round > 0 {
					mu.Lock()
					added = append(added, got.Sub(sent))
					mu.Unlock()
				}
			}()
		}
		wg.Wait() // rounds in step: every session has one turn in flight
	}
	_, res.OtherCPUPercent = meter.stop()
	res.Turns = len(added)
	res.AddedMs = percentiles(added)
	if firstErr != nil {
		res.FirstError = firstErr.Error()
	}
	return res
}

// apiTurn sends one streaming request and returns when its first content
// arrived.
func apiTurn(ctx context.Context, c *openai.Client, session int, marker string) (time.Time, error) {
	stream, err := c.CreateChatCompletionStream(ctx, openai.ChatCompletionRequest{
		Model: "nanofleet", User: fmt.Sprintf("ttft-api-%d", session), Stream: true,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: marker}},
	})
	if err != nil {
		return time.Time{}, err
	}
	defer stream.Close()
	var first time.Time
	for {
		c, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return time.Time{}, err
		}
		if first.IsZero() && len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			first = time.Now()
		}
	}
	if first.IsZero() {
		return time.Time{}, errors.New("no content streamed")
	}
	return first, nil
}

// webChat is one logged-in web chat conversation over its WebSocket.
type webChat struct {
	conn *websocket.Conn
}

func (w *webChat) close() { _ = w.conn.CloseNow() }

// openWebChats logs in with the announced link and opens n conversations.
func openWebChats(ctx context.Context, link string, n int) ([]*webChat, error) {
	u, err := url.Parse(link)
	if err != nil {
		return nil, err
	}
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	resp, err := hc.Get(link)
	if err != nil {
		return nil, fmt.Errorf("login: %w", err)
	}
	resp.Body.Close()
	base := u.Scheme + "://" + u.Host
	out := make([]*webChat, 0, n)
	for range n {
		resp, err := hc.Post(base+"/api/web/conversations", "", nil)
		if err != nil {
			return nil, err
		}
		var conv struct{ ID string }
		err = json.NewDecoder(resp.Body).Decode(&conv)
		resp.Body.Close()
		if err != nil || conv.ID == "" {
			return nil, fmt.Errorf("new conversation: %d %v", resp.StatusCode, err)
		}
		ws, _, err := websocket.Dial(ctx, "ws://"+u.Host+"/api/web/conversations/"+conv.ID+"/ws", &websocket.DialOptions{HTTPClient: hc})
		if err != nil {
			return nil, fmt.Errorf("dial: %w", err)
		}
		out = append(out, &webChat{conn: ws})
	}
	return out, nil
}

// turn sends marker and returns when its first delta arrived.
func (w *webChat) turn(ctx context.Context, marker string) (time.Time, error) {
	if err := wsjson.Write(ctx, w.conn, map[string]any{"type": "send", "text": marker}); err != nil {
		return time.Time{}, err
	}
	var first time.Time
	for {
		var f struct{ Type, Text string }
		if err := wsjson.Read(ctx, w.conn, &f); err != nil {
			return time.Time{}, err
		}
		switch f.Type {
		case "delta":
			if first.IsZero() {
				first = time.Now()
			}
		case "final":
			if first.IsZero() {
				return time.Time{}, errors.New("final without a delta")
			}
			return first, nil
		case "error":
			return time.Time{}, fmt.Errorf("error frame: %s", f.Text)
		}
	}
}
