package fleetstatus

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/directget"
	"github.com/nanofleet/nanofleet/pkg/subject"
	"github.com/nanofleet/nanofleet/pkg/textcut"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// clipRunes bounds the texts a summary keeps (user message, reply, tool
// arguments and results).
const clipRunes = 200

// Recent keeps summaries of the last records of one stream. Each
// [Recent.Update] reads only the records stored since the previous one
// (at most the window), so keeping it current costs one request for each
// new page of records. It reads by direct get, not through a consumer, so
// looking leaves no trace on the server. A Recent is not safe for
// concurrent use.
type Recent[T any] struct {
	stream string
	n      int
	decode func(seq uint64, subj string, data []byte) T
	seqs   []uint64 // ascending, parallel to items
	items  []T
	last   uint64 // highest sequence read
}

// NewRecentTurns keeps the last n turn records of the fleet's history
// stream.
func NewRecentTurns(space subject.Space, n int) *Recent[Turn] {
	return &Recent[Turn]{stream: space.HistoryStream(), n: max(n, 1), decode: decodeTurn}
}

// NewRecentDeadLetters keeps the last n dead letters of the fleet.
func NewRecentDeadLetters(space subject.Space, n int) *Recent[DeadLetter] {
	// The subjects' common part: <prefix>.dlq.
	prefix := strings.TrimSuffix(space.DeadLetter("x"), "x")
	return &Recent[DeadLetter]{stream: space.DeadLetterStream(), n: max(n, 1), decode: func(seq uint64, subj string, data []byte) DeadLetter {
		return decodeDeadLetter(prefix, seq, subj, data)
	}}
}

// Update brings the summaries up to the stream's state st (from
// [Status.Stream]): records removed from the stream are dropped, new ones
// read. On error the records read so far are kept and the next Update goes
// on from there.
func (r *Recent[T]) Update(ctx context.Context, d *directget.Reader, st Stream) error {
	if st.Name != "" && st.Name != r.stream {
		return fmt.Errorf("fleetstatus: state of %s given to the reader of %s", st.Name, r.stream)
	}
	if st.LastSeq < r.last { // the stream was deleted and created again
		r.seqs, r.items, r.last = nil, nil, 0
	}
	r.trim(st.FirstSeq)
	if st.LastSeq == r.last {
		return nil
	}
	from := max(r.last+1, st.FirstSeq, 1)
	if st.LastSeq >= uint64(r.n) {
		from = max(from, st.LastSeq-uint64(r.n)+1)
	}
	msgs, err := d.Range(ctx, r.stream, "", from, st.LastSeq, 0)
	for _, m := range msgs {
		r.seqs = append(r.seqs, m.Seq)
		r.items = append(r.items, r.decode(m.Seq, m.Header.Get(nats.JSSubject), m.Data))
		r.last = m.Seq
	}
	if err == nil {
		r.last = st.LastSeq
	} else {
		err = fmt.Errorf("fleetstatus: %w", err)
	}
	r.trim(st.FirstSeq)
	return err
}

// trim drops records below first and keeps the newest n.
func (r *Recent[T]) trim(first uint64) {
	drop := 0
	for drop < len(r.seqs) && r.seqs[drop] < first {
		drop++
	}
	drop = max(drop, len(r.seqs)-r.n)
	if drop > 0 {
		r.seqs = slices.Delete(r.seqs, 0, drop)
		r.items = slices.Delete(r.items, 0, drop)
	}
}

// Items returns the summaries, newest first.
func (r *Recent[T]) Items() []T {
	out := make([]T, len(r.items))
	for i, it := range r.items {
		out[len(out)-1-i] = it
	}
	return out
}

// Turn summarises one committed turn.
type Turn struct {
	// Seq is the record's sequence in the history stream.
	Seq     uint64 `json:"seq"`
	TurnID  string `json:"turn_id"`
	Session string `json:"session"`
	// Received is when the user's message reached the gateway; Completed
	// when the turn was committed. DurationMS is the time between them,
	// queueing included (0 when either is unknown).
	Received   time.Time `json:"received,omitzero"`
	Completed  time.Time `json:"completed,omitzero"`
	DurationMS int64     `json:"duration_ms"`
	// User is the user's message and Reply the last reply, both clipped.
	User  string `json:"user"`
	Reply string `json:"reply"`
	// Failed reports that the turn ended with an error reply.
	Failed bool       `json:"failed"`
	Tools  []ToolCall `json:"tools"`
	// Problem says why the record could not be read, when it could not.
	Problem string `json:"problem,omitempty"`
}

// ToolCall is one tool call of a turn.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Args and Result are clipped; Answered reports that the turn holds
	// the call's result.
	Args     string `json:"args"`
	Result   string `json:"result"`
	Answered bool   `json:"answered"`
	// DurationMS is the time from the model's answer asking for the call to
	// the call's result (0 when unknown); calls run together overlap.
	DurationMS int64 `json:"duration_ms"`
}

// SummarizeTurn summarises rec, stored at seq.
func SummarizeTurn(seq uint64, rec *nanofleetv1.TurnRecord) Turn {
	t := Turn{Seq: seq, TurnID: rec.GetTurnId(), Session: rec.GetSessionKey(), Tools: []ToolCall{}}
	if c := rec.GetCompletedAt(); c != nil {
		t.Completed = c.AsTime()
	}
	started := map[string]time.Time{} // call id -> when the model asked
	index := map[string]int{}         // call id -> position in t.Tools
	var lastAssistant string
	for _, m := range rec.GetMessages() {
		switch m.GetRole() {
		case "user":
			if t.User == "" && t.Received.IsZero() {
				t.User = clip(m.GetContent())
				if c := m.GetCreatedAt(); c != nil {
					t.Received = c.AsTime()
				}
			}
		case "assistant":
			if s := strings.TrimSpace(m.GetContent()); s != "" {
				lastAssistant = s
			}
			for _, c := range m.GetToolCalls() {
				if m.GetCreatedAt() != nil {
					started[c.GetId()] = m.GetCreatedAt().AsTime()
				}
				index[c.GetId()] = len(t.Tools)
				t.Tools = append(t.Tools, ToolCall{ID: c.GetId(), Name: c.GetName(), Args: clip(c.GetArgumentsJson())})
			}
		case "tool":
			i, ok := index[m.GetToolCallId()]
			if !ok {
				continue
			}
			tc := &t.Tools[i]
			tc.Answered, tc.Result = true, clip(m.GetContent())
			if s, ok := started[tc.ID]; ok && m.GetCreatedAt() != nil {
				tc.DurationMS = max(m.GetCreatedAt().AsTime().Sub(s).Milliseconds(), 0)
			}
		}
	}
	t.Reply = clip(lastAssistant)
	for _, r := range rec.GetReplies() {
		switch r.GetKind() {
		case nanofleetv1.OutboundKind_OUTBOUND_KIND_ERROR:
			t.Failed = true
			t.Reply = clip(r.GetContent())
		case nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, nanofleetv1.OutboundKind_OUTBOUND_KIND_MESSAGE:
			t.Reply = clip(r.GetContent())
		}
	}
	if !t.Received.IsZero() && !t.Completed.IsZero() {
		t.DurationMS = max(t.Completed.Sub(t.Received).Milliseconds(), 0)
	}
	return t
}

func decodeTurn(seq uint64, _ string, data []byte) Turn {
	var rec nanofleetv1.TurnRecord
	if err := proto.Unmarshal(data, &rec); err != nil {
		return Turn{Seq: seq, Tools: []ToolCall{}, Problem: "undecodable turn record: " + err.Error()}
	}
	return SummarizeTurn(seq, &rec)
}

// DeadLetter summarises one dead letter.
type DeadLetter struct {
	// Seq is the dead letter's sequence in the dead-letter stream.
	Seq uint64 `json:"seq"`
	// Source is what gave up on the message (e.g. "inbound", "outbound").
	Source string `json:"source"`
	// Subject the message was read from.
	Subject    string    `json:"subject"`
	Reason     string    `json:"reason"`
	Deliveries uint64    `json:"deliveries"`
	FailedAt   time.Time `json:"failed_at,omitzero"`
	// Problem says why the dead letter could not be read, when it could
	// not.
	Problem string `json:"problem,omitempty"`
}

func decodeDeadLetter(subjPrefix string, seq uint64, subj string, data []byte) DeadLetter {
	d := DeadLetter{Seq: seq}
	if tok, ok := strings.CutPrefix(subj, subjPrefix); ok {
		if src, err := subject.ParseToken(tok); err == nil {
			d.Source = src
		}
	}
	var dl nanofleetv1.DeadLetter
	if err := proto.Unmarshal(data, &dl); err != nil {
		d.Problem = "undecodable dead letter: " + err.Error()
		return d
	}
	d.Subject, d.Reason, d.Deliveries = dl.GetSubject(), clip(dl.GetReason()), dl.GetDeliveries()
	if f := dl.GetFailedAt(); f != nil {
		d.FailedAt = f.AsTime()
	}
	return d
}

// clip collapses white space and bounds s to clipRunes runes.
func clip(s string) string { return textcut.Line(s, clipRunes-1) }
