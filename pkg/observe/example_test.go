package observe_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/nanofleet/nanofleet/pkg/observe"
)

// A service builds its registry and metrics once, serves them on its
// operator port, and stops the server last.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	reg := observe.NewRegistry()
	metrics := observe.NewMetrics(reg)
	srv := observe.NewServer("127.0.0.1:0", reg, func(ctx context.Context) error {
		return nil // e.g. check the NATS connection and the inbound consumer
	})
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()
	select {
	case <-srv.Listening():
	case err := <-ran:
		fmt.Println(err)
		return
	}

	start := time.Now()
	// ... run a turn ...
	metrics.TurnDuration.Observe(time.Since(start).Seconds())
	metrics.Turns.WithLabelValues(observe.OutcomeOK).Inc()

	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	fmt.Print(rec.Code, " ", rec.Body)

	cancel() // Run stops the server, waiting for requests in flight
	fmt.Println(<-ran)
	// Output:
	// 200 ready
	// <nil>
}
