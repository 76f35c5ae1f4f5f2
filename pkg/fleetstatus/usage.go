package fleetstatus

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/directget"
	"github.com/nanofleet/nanofleet/pkg/subject"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// usagePage is how many turn records one request of [Usage.Update] reads.
const usagePage = 500

// Tokens is the token usage of one session, user or model.
type Tokens struct {
	// Key is the session key, the user ("<channel>:<sender id>") or the
	// model; empty for the total.
	Key        string `json:"key"`
	Turns      int64  `json:"turns"`
	ModelCalls int64  `json:"model_calls"`
	Prompt     int64  `json:"prompt"`
	Completion int64  `json:"completion"`
	// Cached is part of Prompt, Reasoning part of Completion.
	Cached    int64 `json:"cached"`
	Reasoning int64 `json:"reasoning"`
}

func (t *Tokens) add(u *nanofleetv1.TokenUsage) {
	t.Turns++
	t.ModelCalls += int64(u.GetModelCalls())
	t.Prompt += u.GetPromptTokens()
	t.Completion += u.GetCompletionTokens()
	t.Cached += u.GetCachedTokens()
	t.Reasoning += u.GetReasoningTokens()
}

// UsageSummary is the fleet's token usage over the turn records read.
type UsageSummary struct {
	Total Tokens `json:"total"`
	// The groups with the most tokens (prompt + completion), most first.
	Sessions []Tokens `json:"sessions"`
	Users    []Tokens `json:"users"`
	Models   []Tokens `json:"models"`
}

// Usage sums the token usage the turn records of the history stream carry,
// per session, user and model. Like [Recent] it reads only the records
// stored since the previous [Usage.Update], by direct get; unlike it, it
// keeps the sums of records the stream has since dropped. The first Update
// reads the whole stream, a page at a time: on error the pages read are
// kept and the next Update goes on from there. Not safe for concurrent use.
type Usage struct {
	stream                  string
	last                    uint64
	total                   Tokens
	sessions, users, models map[string]*Tokens
}

// NewUsage sums the usage of the fleet's history stream.
func NewUsage(space subject.Space) *Usage {
	u := &Usage{stream: space.HistoryStream()}
	u.reset()
	return u
}

func (u *Usage) reset() {
	u.last, u.total = 0, Tokens{}
	u.sessions, u.users, u.models = map[string]*Tokens{}, map[string]*Tokens{}, map[string]*Tokens{}
}

// Update reads the records up to the stream's state st (from
// [Status.Stream]).
func (u *Usage) Update(ctx context.Context, d *directget.Reader, st Stream) error {
	if st.Name != "" && st.Name != u.stream {
		return fmt.Errorf("fleetstatus: state of %s given to the usage of %s", st.Name, u.stream)
	}
	if st.LastSeq < u.last { // the stream was deleted and created again
		u.reset()
	}
	for u.last < st.LastSeq {
		from := max(u.last+1, st.FirstSeq, 1)
		msgs, err := d.Range(ctx, u.stream, "", from, st.LastSeq, usagePage)
		for _, m := range msgs {
			rec := &nanofleetv1.TurnRecord{}
			if proto.Unmarshal(m.Data, rec) == nil && rec.GetUsage() != nil {
				u.add(rec)
			}
			u.last = m.Seq
		}
		if err != nil {
			return fmt.Errorf("fleetstatus: usage: %w", err)
		}
		if len(msgs) == 0 {
			u.last = st.LastSeq // the rest was removed meanwhile
		}
	}
	return nil
}

func (u *Usage) add(rec *nanofleetv1.TurnRecord) {
	us := rec.GetUsage()
	u.total.add(us)
	group := func(m map[string]*Tokens, key string) {
		t := m[key]
		if t == nil {
			t = &Tokens{Key: key}
			m[key] = t
		}
		t.add(us)
	}
	group(u.sessions, rec.GetSessionKey())
	group(u.users, userOf(rec))
	group(u.models, cmp.Or(us.GetModel(), "(unknown)"))
}

// userOf names the turn's user: the sender id with the channel of the
// session, since ids are only unique within a platform. A sender whose
// id is its channel's name (the terminal's "cli", the web chat's "web",
// the heartbeat's: one sender for the whole channel) is named once:
// "cli", not "cli:cli".
func userOf(rec *nanofleetv1.TurnRecord) string {
	channel, _, _ := strings.Cut(rec.GetSessionKey(), ":")
	sender := cmp.Or(rec.GetSenderId(), "(unknown)")
	if sender == channel {
		return channel
	}
	return channel + ":" + sender
}

// Summary returns the total and the top n sessions, users and models.
func (u *Usage) Summary(n int) UsageSummary {
	return UsageSummary{Total: u.total, Sessions: top(u.sessions, n), Users: top(u.users, n), Models: top(u.models, n)}
}

func top(m map[string]*Tokens, n int) []Tokens {
	out := make([]Tokens, 0, len(m))
	for _, t := range m {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b Tokens) int {
		return cmp.Or(cmp.Compare(b.Prompt+b.Completion, a.Prompt+a.Completion), strings.Compare(a.Key, b.Key))
	})
	return out[:min(n, len(out))]
}
