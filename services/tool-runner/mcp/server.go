package mcp

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/nanofleet/nanofleet/pkg/toolschema"
)

// clientVersion is what the runner tells servers about itself.
const clientVersion = "0.1.0"

// State is where a server is in its life.
type State string

// States of a server.
const (
	// StateStarting: the first attempt to connect is running.
	StateStarting State = "starting"
	// StateReady: connected; its tools are served.
	StateReady State = "ready"
	// StateRestarting: the connection was lost and is being made again;
	// calls wait for it (within their timeout).
	StateRestarting State = "restarting"
	// StateDown: the last attempt failed; the next one comes after a
	// backoff, and its tools are withdrawn until then.
	StateDown State = "down"
	// StateStopped: the manager stopped.
	StateStopped State = "stopped"
)

// ServerStatus describes one server for operators and tests.
type ServerStatus struct {
	Name      string
	Transport Transport
	State     State
	// Tools is how many tools (resources and prompts included) it serves.
	Tools int
	// PID of the stdio server's process (bubblewrap's in bwrap mode);
	// 0 when it is not running or not a stdio server.
	PID int
	// Restarts counts the connections lost since start.
	Restarts int
	// LastError is why the last attempt failed or the connection ended.
	LastError string
}

// server is one configured MCP server. Its concerns live in their own
// files: supervision (supervise.go) is the only writer of its [life];
// discovery (discover.go) lists what it offers; the [catalog] publishes
// that; routing (route.go) sends calls to its current connection.
type server struct {
	m      *Manager
	name   string
	cfg    ServerConfig
	tr     Transport
	log    *slog.Logger
	stderr *stderrLog
	http   *http.Client

	// listChanged and health wake the supervisor: the server said its
	// listing changed; a call failed in a way that asks for a ping.
	listChanged chan struct{}
	health      chan struct{}
	// firstDone is closed when the first attempt has ended either way.
	firstDone chan struct{}
	firstOnce sync.Once

	life *life
}

func newServer(m *Manager, name string, c ServerConfig) (*server, error) {
	log := m.log.With("server", name)
	s := &server{
		m: m, name: name, cfg: c, tr: c.Transport(), log: log,
		stderr:      &stderrLog{log: log},
		listChanged: make(chan struct{}, 1),
		health:      make(chan struct{}, 1),
		firstDone:   make(chan struct{}),
		life:        newLife(),
	}
	if s.tr != TransportStdio {
		hc, err := httpClient(c, m.guardOpts...)
		if err != nil {
			return nil, fmt.Errorf("tools.mcpServers.%s: %w", name, err)
		}
		s.http = hc
	}
	return s, nil
}

func (s *server) status() ServerStatus {
	cur, _ := s.life.snapshot()
	st := ServerStatus{Name: s.name, Transport: s.tr, State: cur.state, Tools: len(cur.served), Restarts: cur.restarts}
	if cur.lastErr != nil {
		st.LastError = cur.lastErr.Error()
	}
	if c := cur.conn; c != nil && c.proc != nil && c.proc.cmd.Process != nil && cur.state == StateReady {
		st.PID = c.proc.cmd.Process.Pid
	}
	return st
}

func (s *server) definitions() []toolschema.Tool {
	cur, _ := s.life.snapshot()
	defs := make([]toolschema.Tool, len(cur.served))
	for i, t := range cur.served {
		defs[i] = t.Definition()
	}
	toolschema.SortTools(defs)
	return defs
}

// signal wakes the supervisor on ch without blocking; one pending signal
// is enough.
func (s *server) signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// withStderr adds what a stdio server last wrote to stderr to an error.
func (s *server) withStderr(err error) error {
	if s.tr != TransportStdio {
		return err
	}
	if tail := s.stderr.Tail(); tail != "" {
		return fmt.Errorf("%w; the server's stderr ends with: %s", err, tail)
	}
	return err
}
