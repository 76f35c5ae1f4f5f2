package dashboard

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go"

	"github.com/nanofleet/nanofleet/pkg/backoff"
)

const (
	// settle is how long a push waits after a turn is committed or a
	// message dead-lettered: the subject's message can reach us before
	// the stream has stored it, and a burst of commits makes one push.
	settle = 150 * time.Millisecond
	// writeTimeout bounds sending one snapshot to a page.
	writeTimeout = 10 * time.Second
)

// live pushes a snapshot to the page every interval, and soon after each
// new turn record or dead letter, until the page goes away.
func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	// Accept checks that the Origin is this host, so other sites cannot
	// read the fleet with the operator's cookie.
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		s.log.Debug("dashboard socket refused", "err", err)
		return
	}
	defer func() { _ = c.CloseNow() }()
	// The page sends nothing; CloseRead answers its pings and ends ctx
	// when it closes.
	ctx := c.CloseRead(r.Context())

	kick := make(chan struct{}, 1)
	poke := func(*nats.Msg) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	space := s.deps.Bus.Space
	for _, subj := range []string{space.HistoryAll(), space.DeadLetterAll()} {
		sub, err := s.deps.Bus.NC.Subscribe(subj, poke)
		if err != nil {
			s.log.Warn("dashboard socket cannot follow new records; updating on the interval only", "subject", subj, "err", err)
			continue
		}
		defer func() { _ = sub.Unsubscribe() }()
	}

	ticker := time.NewTicker(s.cfg.Interval)
	defer ticker.Stop()
	notBefore := s.deps.Now().Add(-s.cfg.Interval / 2)
	for {
		if err := s.push(ctx, c, notBefore); err != nil {
			if websocket.CloseStatus(err) == -1 && !errors.Is(err, context.Canceled) {
				s.log.Debug("dashboard socket", "err", err)
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			notBefore = s.deps.Now().Add(-s.cfg.Interval / 2)
		case <-kick:
			if backoff.Sleep(ctx, settle) != nil {
				return
			}
			notBefore = s.deps.Now()
			ticker.Reset(s.cfg.Interval)
		}
	}
}

// push sends the page a snapshot begun at notBefore or later.
func (s *Server) push(ctx context.Context, c *websocket.Conn, notBefore time.Time) error {
	_, data, err := s.snaps.get(ctx, notBefore)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	return c.Write(ctx, websocket.MessageText, data)
}
