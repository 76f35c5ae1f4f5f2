package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

// benchFile is the file the read_file tool call of a turn reads.
const benchFile = "bench.txt"

// startModel starts the fake OpenAI-compatible model: every reply after
// latency; with tool, a turn's first call asks for one read_file and the
// second answers. It shares the machine with the fleet, so it reads of
// each request (about 12 KB of JSON, the system prompt and the tool
// schemas most of it) only the last message: decoding all of it cost the
// bench process more CPU per turn than the worker's whole bus work.
func startModel(latency time.Duration, tool bool) (*llmtest.Server, error) {
	srv, err := llmtest.NewStandalone(llmtest.WithLatency(latency), llmtest.WithMaxRecorded(0), llmtest.WithLightRequests())
	if err != nil {
		return nil, err
	}
	srv.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		if tool && r.LastMessage().Role == "user" {
			return llmtest.ToolCalls(llmtest.Call("read_file", `{"path":"`+benchFile+`"}`))
		}
		return llmtest.Text("ok")
	})
	return srv, nil
}

// callsPerTurn is how many model calls a turn makes.
func callsPerTurn(tool bool) int {
	if tool {
		return 2
	}
	return 1
}

// load is a closed-loop load: Concurrency clients, each taking the next
// of Chats sessions and sending it TurnsPerChat messages, each after the
// previous one's final reply. Concurrency is the number of sessions
// talking at once.
type load struct {
	Concurrency  int
	Chats        int
	TurnsPerChat int
	// Prefix makes the chat ids of this load unique.
	Prefix string
	// TurnTimeout bounds one turn (default two minutes).
	TurnTimeout time.Duration
}

// sample is what a load measured.
type sample struct {
	Latencies []time.Duration
	Errors    int
	FirstErr  error
	Elapsed   time.Duration
}

// turnFunc runs one turn of chat and returns when its final reply came.
type turnFunc func(ctx context.Context, chat string, n int) error

// run drives the load through turn.
func (l load) run(ctx context.Context, turn turnFunc) sample {
	if l.TurnTimeout == 0 {
		l.TurnTimeout = 2 * time.Minute
	}
	var (
		next atomic.Int64
		mu   sync.Mutex
		out  sample
		wg   sync.WaitGroup
	)
	start := time.Now()
	for range min(l.Concurrency, l.Chats) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, l.TurnsPerChat)
			var errs int
			var first error
			for ctx.Err() == nil {
				c := int(next.Add(1)) - 1
				if c >= l.Chats {
					break
				}
				chat := fmt.Sprintf("%s-%d", l.Prefix, c)
				for i := range l.TurnsPerChat {
					tctx, cancel := context.WithTimeout(ctx, l.TurnTimeout)
					t0 := time.Now()
					err := turn(tctx, chat, i)
					d := time.Since(t0)
					cancel()
					if err != nil {
						errs++
						if first == nil {
							first = fmt.Errorf("chat %s turn %d: %w", chat, i, err)
						}
						continue
					}
					lat = append(lat, d)
				}
			}
			mu.Lock()
			out.Latencies = append(out.Latencies, lat...)
			out.Errors += errs
			if out.FirstErr == nil {
				out.FirstErr = first
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	out.Elapsed = time.Since(start)
	return out
}

// fleetTurn sends a message through the fleet client and waits for the
// turn's final reply.
func fleetTurn(c *fleet.Client) turnFunc {
	return func(ctx context.Context, chat string, n int) error {
		replies, err := c.Ask(ctx, fleet.Request{ChatID: chat, Text: fmt.Sprintf("message %d", n)})
		if err != nil {
			return err
		}
		final, err := fleet.Final(replies)
		if err != nil {
			return err
		}
		if final.GetKind() != nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL {
			return fmt.Errorf("turn ended with %s: %s", final.GetKind(), final.GetContent())
		}
		return nil
	}
}
