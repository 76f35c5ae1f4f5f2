package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/directget"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Entry is a stored history entry with its log stream sequence.
type Entry struct {
	Seq uint64
	*nanofleetv1.HistoryEntry
}

// Log is the history log: every scope's entries in one stream.
type Log struct {
	direct *directget.Reader
	js     jetstream.JetStream
	names  Names
}

// OpenLog returns the history log of the fleet b belongs to.
func OpenLog(b *bus.Bus) *Log {
	return &Log{direct: b.Direct, js: b.JS, names: NamesOf(b.Space)}
}

// EntryID is the deterministic message id of a session's range.
func EntryID(sessionKey string, from, to uint64) string {
	return fmt.Sprintf("%s:%d-%d", sessionKey, from, to)
}

// Append logs e on its scope's subject, provided the session's newest
// entry (in any scope) is still expectLast (0: none). A second writer of
// the same range gets ErrConflict and finds the entry with [Log.Last].
func (l *Log) Append(ctx context.Context, e *nanofleetv1.HistoryEntry, expectLast uint64) (uint64, error) {
	s, err := ParseScope(e.GetScope())
	if err != nil {
		return 0, err
	}
	data, err := proto.Marshal(e)
	if err != nil {
		return 0, fmt.Errorf("encode history entry: %w", err)
	}
	msg := nats.NewMsg(l.names.Log(s, e.GetSessionKey()))
	msg.Data = data
	msg.Header.Set(nats.MsgIdHdr, EntryID(e.GetSessionKey(), e.GetFromSeq(), e.GetToSeq()))
	ack, err := bus.PublishMsg(ctx, l.js, msg,
		jetstream.WithExpectLastSequenceForSubject(expectLast, l.names.LogSession(e.GetSessionKey())))
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			return 0, fmt.Errorf("%w: history log of %s moved past %d", ErrConflict, e.GetSessionKey(), expectLast)
		}
		if bus.TooLarge(err) {
			return 0, fmt.Errorf("%w: history entry of %s, %d bytes: %w", ErrTooLarge, e.GetSessionKey(), len(data), err)
		}
		return 0, fmt.Errorf("append history entry of %s: %w", e.GetSessionKey(), err)
	}
	return ack.Sequence, nil
}

// Fits returns nil if [Log.Append] can store each of entries, else an
// error wrapping ErrTooLarge that names the first too large, its size and
// the limit: the server's max payload or the log stream's max message
// size, less room for the headers. It looks the stream up once.
func (l *Log) Fits(ctx context.Context, entries ...*nanofleetv1.HistoryEntry) error {
	st, err := l.js.Stream(ctx, l.names.LogStream())
	if err != nil {
		return fmt.Errorf("history log: %w", err)
	}
	for _, e := range entries {
		if err := fits(l.js.Conn(), int64(st.CachedInfo().Config.MaxMsgSize), "history entry of "+e.GetSessionKey(), proto.Size(e)); err != nil {
			return err
		}
	}
	return nil
}

// Last returns the session's newest entry in any scope, or nil.
func (l *Log) Last(ctx context.Context, sessionKey string) (*Entry, error) {
	m, ok, err := l.direct.Last(ctx, l.names.LogStream(), l.names.LogSession(sessionKey))
	if err != nil || !ok {
		return nil, err
	}
	return decodeEntry(m)
}

// Get returns the entry at seq.
func (l *Log) Get(ctx context.Context, seq uint64) (*Entry, error) {
	raw, err := getMsg(ctx, l.js, l.names.LogStream(), seq, "history log", "history entry")
	if err != nil {
		return nil, err
	}
	return decodeEntry(directget.Msg{Seq: raw.Sequence, Data: raw.Data})
}

// getMsg reads message seq of stream; a missing one is [ErrNotFound].
// Errors name the stream and the message as streamName and msgName.
func getMsg(ctx context.Context, js jetstream.JetStream, stream string, seq uint64, streamName, msgName string) (*jetstream.RawStreamMsg, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", streamName, err)
	}
	raw, err := st.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("%w: %s %d", ErrNotFound, msgName, seq)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s %d: %w", msgName, seq, err)
	}
	return raw, nil
}

// Scope returns a scope's entries after seq, oldest first, at most max
// (0: all).
func (l *Log) Scope(ctx context.Context, s Scope, after uint64, max int) ([]Entry, error) {
	return l.read(ctx, l.names.LogScope(s), after, max)
}

// Agent returns the entries of every scope of an agent after seq, oldest
// first, at most max (0: all).
func (l *Log) Agent(ctx context.Context, agent string, after uint64, max int) ([]Entry, error) {
	return l.read(ctx, l.names.LogAgent(agent), after, max)
}

// Session returns a session's entries in every scope, oldest first.
func (l *Log) Session(ctx context.Context, sessionKey string) ([]Entry, error) {
	return l.read(ctx, l.names.LogSession(sessionKey), 0, 0)
}

func (l *Log) read(ctx context.Context, filter string, after uint64, max int) ([]Entry, error) {
	msgs, err := l.direct.Range(ctx, l.names.LogStream(), filter, after+1, 0, max)
	if err != nil {
		return nil, fmt.Errorf("history log: %w", err)
	}
	out := make([]Entry, 0, len(msgs))
	for _, m := range msgs {
		e, err := decodeEntry(m)
		if err != nil {
			return nil, err
		}
		out = append(out, *e)
	}
	return out, nil
}

// Search returns up to limit of the scope's entries that match query,
// newest first. An entry matches when it holds every word of the query
// (case-insensitive); when none does, entries holding the most words come
// first. At most scan entries are read.
func (l *Log) Search(ctx context.Context, s Scope, query string, limit, scan int) ([]Entry, error) {
	words := strings.Fields(strings.ToLower(query))
	if len(words) == 0 {
		return nil, fmt.Errorf("%w: empty query", ErrInvalid)
	}
	all, err := l.Scope(ctx, s, 0, scan)
	if err != nil {
		return nil, err
	}
	type hit struct {
		e     Entry
		score int
	}
	var hits []hit
	for _, e := range all {
		text := strings.ToLower(e.GetText())
		n := 0
		for _, w := range words {
			if strings.Contains(text, w) {
				n++
			}
		}
		if n > 0 {
			hits = append(hits, hit{e, n})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int {
		if a.score != b.score {
			return b.score - a.score
		}
		switch {
		case a.e.Seq > b.e.Seq:
			return -1
		case a.e.Seq < b.e.Seq:
			return 1
		}
		return 0
	})
	out := make([]Entry, 0, min(limit, len(hits)))
	for _, h := range hits {
		if len(out) == limit {
			break
		}
		out = append(out, h.e)
	}
	return out, nil
}

func decodeEntry(m directget.Msg) (*Entry, error) {
	e := &nanofleetv1.HistoryEntry{}
	if err := proto.Unmarshal(m.Data, e); err != nil {
		return nil, fmt.Errorf("decode history entry %d: %w", m.Seq, err)
	}
	return &Entry{Seq: m.Seq, HistoryEntry: e}, nil
}
