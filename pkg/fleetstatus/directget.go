package fleetstatus

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
)

// readRange calls each for the stored messages of stream with sequences
// from..to (deleted ones are skipped), using the server's batched direct
// get (nats-server >= 2.11; the stream must allow direct gets): one
// request per page, many replies ended by a "204 EOB" status. It reads
// nothing through a consumer, so looking leaves no trace on the server.
func readRange(ctx context.Context, nc *nats.Conn, stream string, from, to uint64, each func(seq uint64, subj string, data []byte)) error {
	const page = 64
	for from <= to {
		batch := min(to-from+1, page)
		req, _ := json.Marshal(struct {
			Seq   uint64 `json:"seq"`
			Batch int    `json:"batch"`
		}{from, int(batch)})
		next, done, err := getPage(ctx, nc, stream, req, to, each)
		if err != nil {
			return fmt.Errorf("fleetstatus: direct get %s from %d: %w", stream, from, err)
		}
		if done || next <= from {
			return nil
		}
		from = next
	}
	return nil
}

// getPage sends one batched direct get and reads its replies. next is the
// sequence after the last one read; done reports that nothing more is
// stored up to to.
func getPage(ctx context.Context, nc *nats.Conn, stream string, req []byte, to uint64, each func(uint64, string, []byte)) (next uint64, done bool, err error) {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return 0, false, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, req); err != nil {
		return 0, false, err
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return 0, false, err
		}
		switch status := m.Header.Get("Status"); status {
		case "":
		case "204": // end of batch
			pending, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			return next, pending == 0 || next > to, nil
		case "404": // nothing stored from the sequence on
			return next, true, nil
		default:
			return 0, false, fmt.Errorf("status %s %s", status, m.Header.Get("Description"))
		}
		seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("bad Nats-Sequence %q", m.Header.Get("Nats-Sequence"))
		}
		if seq <= to {
			each(seq, m.Header.Get("Nats-Subject"), m.Data)
		}
		next = seq + 1
	}
}
