package session

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
)

// storedMsg is one message read by a batched direct get.
type storedMsg struct {
	Seq  uint64
	Data []byte
}

// getBatch reads every message on subj with a sequence >= from, using the
// server's batched direct get (nats-server >= 2.11): one request, many
// replies ended by a "204 EOB" status. nats.go has no client call for it,
// and loading a history through a new consumer per turn would cost a
// consumer create and delete on the server each time.
func getBatch(ctx context.Context, nc *nats.Conn, stream, subj string, from uint64, max int) ([]storedMsg, error) {
	const page = 256
	var out []storedMsg
	for {
		req, _ := json.Marshal(struct {
			Seq     uint64 `json:"seq"`
			NextFor string `json:"next_by_subj"`
			Batch   int    `json:"batch"`
		}{from, subj, page})
		inbox := nc.NewRespInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			return nil, fmt.Errorf("direct get %s: %w", subj, err)
		}
		if err := nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, req); err != nil {
			_ = sub.Unsubscribe()
			return nil, fmt.Errorf("direct get %s: %w", subj, err)
		}
		n, pending, err := readBatch(ctx, sub, func(m storedMsg) { out = append(out, m); from = m.Seq + 1 })
		_ = sub.Unsubscribe()
		if err != nil {
			return nil, fmt.Errorf("direct get %s: %w", subj, err)
		}
		if max > 0 && len(out) > max {
			return nil, fmt.Errorf("direct get %s: more than %d records", subj, max)
		}
		if n == 0 || pending == 0 {
			return out, nil
		}
	}
}

// readBatch reads replies until the end-of-batch or not-found status.
func readBatch(ctx context.Context, sub *nats.Subscription, each func(storedMsg)) (n int, pending uint64, err error) {
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return n, 0, err
		}
		switch status := m.Header.Get("Status"); status {
		case "":
		case "204": // end of batch
			pending, _ = strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			return n, pending, nil
		case "404":
			return n, 0, nil
		default:
			return n, 0, fmt.Errorf("status %s %s", status, m.Header.Get("Description"))
		}
		seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if err != nil {
			return n, 0, fmt.Errorf("bad Nats-Sequence %q", m.Header.Get("Nats-Sequence"))
		}
		each(storedMsg{Seq: seq, Data: m.Data})
		n++
	}
}
