package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/fleetstatus"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

// TestWriteConsumers: the durable consumers are listed; the clients'
// ephemeral ones are counted, with when the server deletes them.
func TestWriteConsumers(t *testing.T) {
	workers := fleetstatus.Consumer{Stream: "NANOFLEET_IN", Name: "workers", Pending: 2, InFlight: 1, Waiting: 1}
	client := func(name string, reaped time.Duration) fleetstatus.Consumer {
		return fleetstatus.Consumer{Stream: "NANOFLEET_OUT", Name: name, Pending: 3, Ephemeral: true, InactiveThreshold: reaped}
	}
	tests := []struct {
		name      string
		consumers []fleetstatus.Consumer
		want      []string
		notWant   []string
	}{
		{"durable only", []fleetstatus.Consumer{workers}, []string{"NANOFLEET_IN/workers  2"}, []string{"client consumer"}},
		{"clients counted, not listed",
			[]fleetstatus.Consumer{workers, client("kZmD_1", 30*time.Second), client("hy2C_1", 5*time.Second)},
			[]string{"NANOFLEET_IN/workers  2", "(and 2 client consumer(s): CLI commands, gateway watches; each deleted at most 30s after its client's last pull)"},
			[]string{"kZmD_1", "hy2C_1"}},
		{"client without threshold", []fleetstatus.Consumer{client("x_1", 0)}, []string{"(and 1 client consumer(s): CLI commands, gateway watches)\n"}, []string{"deleted"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
			writeConsumers(w, tt.consumers)
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			for _, s := range tt.want {
				if !strings.Contains(out, s) {
					t.Errorf("output lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tt.notWant {
				if strings.Contains(out, s) {
					t.Errorf("output has %q:\n%s", s, out)
				}
			}
		})
	}
}

// TestStatusWithoutAFleet: a NATS server the fleet never provisioned
// (a wrong --nats, services not started yet) is said to have no fleet,
// as agent and chat say; status printed empty tables and exited 0.
func TestStatusWithoutAFleet(t *testing.T) {
	srv := bustest.StartServer(t)
	for _, args := range [][]string{{"status"}, {"cron", "list", "--session", "cli:direct"}, {"memory", "links"}} {
		env, out, _ := testEnv(t, nil)
		err := dispatch(t.Context(), env, append(args, "--nats", srv.ClientURL()))
		if !errors.Is(err, fleet.ErrNoFleet) || !strings.Contains(err.Error(), "start the fleet's services first") {
			t.Errorf("%q: %v, want %v", args, err, fleet.ErrNoFleet)
		}
		if out.Len() > 0 {
			t.Errorf("%q printed %q", args, out.String())
		}
	}
}
