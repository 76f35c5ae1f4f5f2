// Package directget reads JetStream stream messages with the server's
// direct get API, including the batched form (nats-server >= 2.11: one
// request, many replies ended by a "204 EOB" status) that nats.go has no
// call for. Reading a range this way costs one round trip per page instead
// of creating and deleting a consumer. Streams must allow direct access.
package directget

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
)

// Msg is one message read by a direct get.
type Msg struct {
	Seq    uint64
	Header nats.Header
	Data   []byte
}

// Range reads the messages matching filter (wildcards allowed) with a
// sequence in [from, to] (to 0: no bound), at most max (0: no bound),
// oldest first, using the server's batched direct get (one request per
// page; the stream needs AllowDirect).
func Range(ctx context.Context, nc *nats.Conn, stream, filter string, from, to uint64, max int) ([]Msg, error) {
	const page = 256
	var out []Msg
	for {
		n := page
		if max > 0 && max-len(out) < n {
			n = max - len(out)
		}
		req, _ := json.Marshal(struct {
			Seq     uint64 `json:"seq"`
			NextFor string `json:"next_by_subj"`
			Batch   int    `json:"batch"`
		}{from, filter, n})
		got, pending, err := request(ctx, nc, stream, req)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", filter, err)
		}
		for _, m := range got {
			if to > 0 && m.Seq > to {
				return out, nil
			}
			out = append(out, m)
			from = m.Seq + 1
		}
		if len(got) == 0 || pending == 0 || (max > 0 && len(out) >= max) {
			return out, nil
		}
	}
}

// LastUpTo returns the newest message on subj (a literal subject) with a
// sequence at most upTo (0: the newest), or found false.
func LastUpTo(ctx context.Context, nc *nats.Conn, stream, subj string, upTo uint64) (Msg, bool, error) {
	req, _ := json.Marshal(struct {
		Multi []string `json:"multi_last"`
		UpTo  uint64   `json:"up_to_seq,omitempty"`
		Batch int      `json:"batch"`
	}{[]string{subj}, upTo, 1})
	got, _, err := request(ctx, nc, stream, req)
	if err != nil {
		return Msg{}, false, fmt.Errorf("read last of %s: %w", subj, err)
	}
	if len(got) == 0 {
		return Msg{}, false, nil
	}
	return got[len(got)-1], true, nil
}

// Last returns the newest message matching filter (wildcards allowed).
func Last(ctx context.Context, nc *nats.Conn, stream, filter string) (Msg, bool, error) {
	req, _ := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{filter})
	got, _, err := request(ctx, nc, stream, req)
	if err != nil {
		return Msg{}, false, fmt.Errorf("read last of %s: %w", filter, err)
	}
	if len(got) == 0 {
		return Msg{}, false, nil
	}
	return got[0], true, nil
}

// request sends one direct get request and reads its replies: one
// message, or a batch ended by a "204 EOB" status, or "404" for none.
func request(ctx context.Context, nc *nats.Conn, stream string, req []byte) ([]Msg, uint64, error) {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, req); err != nil {
		return nil, 0, err
	}
	var out []Msg
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, 0, err
		}
		switch status := m.Header.Get("Status"); status {
		case "":
		case "204": // end of batch
			pending, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			return out, pending, nil
		case "404":
			return out, 0, nil
		default:
			return nil, 0, fmt.Errorf("status %s %s", status, m.Header.Get("Description"))
		}
		seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("bad Nats-Sequence %q", m.Header.Get("Nats-Sequence"))
		}
		out = append(out, Msg{Seq: seq, Header: m.Header, Data: m.Data})
		if m.Header.Get("Nats-Num-Pending") == "" && m.Header.Get("Nats-Last-Sequence") == "" {
			// A single-message reply: no end-of-batch marker follows.
			return out, 0, nil
		}
	}
}
