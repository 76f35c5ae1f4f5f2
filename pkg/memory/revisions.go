package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/directget"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Revision kinds.
const (
	RevisionDream   = "dream"
	RevisionRestore = "restore"
	RevisionSync    = "sync"
)

// Short bucket names a FileChange names.
const (
	ChangeMemory  = "memory"
	ChangeProfile = "profile"
)

// Revision is a stored revision with its number (its stream sequence).
type Revision struct {
	Seq uint64
	*nanofleetv1.MemoryRevision
}

// Revisions keeps every change Dream, a restore or the workspace sync made
// to memory and profile files, each with the content before and after, so
// any of them can be looked at and undone.
type Revisions struct {
	direct  *directget.Reader
	js      jetstream.JetStream
	names   Names
	docs    *Docs
	profile jetstream.KeyValue
}

// OpenRevisions returns the revisions of the fleet b belongs to.
func OpenRevisions(ctx context.Context, b *bus.Bus) (*Revisions, error) {
	docs, err := OpenDocs(ctx, b)
	if err != nil {
		return nil, err
	}
	prof, err := b.KV(ctx, bus.BucketProfile)
	if err != nil {
		return nil, err
	}
	return &Revisions{direct: b.Direct, js: b.JS, names: NamesOf(b.Space), docs: docs, profile: prof}, nil
}

// Append stores r on its scope's subject. msgID, when set, makes a
// retried append a no-op.
func (r *Revisions) Append(ctx context.Context, rev *nanofleetv1.MemoryRevision, msgID string) (uint64, error) {
	s, err := ParseScope(rev.GetScope())
	if err != nil {
		return 0, err
	}
	if rev.CreatedAt == nil {
		rev.CreatedAt = timestamppb.Now()
	}
	data, err := proto.Marshal(rev)
	if err != nil {
		return 0, fmt.Errorf("encode revision: %w", err)
	}
	msg := nats.NewMsg(r.names.Revision(s))
	msg.Data = data
	if msgID != "" {
		msg.Header.Set(nats.MsgIdHdr, msgID)
	}
	ack, err := bus.PublishMsg(ctx, r.js, msg)
	if err != nil {
		return 0, fmt.Errorf("store revision: %w", err)
	}
	return ack.Sequence, nil
}

// Fits returns nil if [Revisions.Append] can store rev, else an error
// wrapping ErrTooLarge that names its size and the limit: the server's max
// payload or the revision stream's max message size, less room for the
// headers.
func (r *Revisions) Fits(ctx context.Context, rev *nanofleetv1.MemoryRevision) error {
	st, err := r.js.Stream(ctx, r.names.RevisionStream())
	if err != nil {
		return fmt.Errorf("memory revisions: %w", err)
	}
	return fits(r.js.Conn(), int64(st.CachedInfo().Config.MaxMsgSize), "revision of "+rev.GetScope(), proto.Size(rev))
}

// Get returns revision seq.
func (r *Revisions) Get(ctx context.Context, seq uint64) (*Revision, error) {
	raw, err := getMsg(ctx, r.js, r.names.RevisionStream(), seq, "revisions", "revision")
	if err != nil {
		return nil, err
	}
	rev := &nanofleetv1.MemoryRevision{}
	if err := proto.Unmarshal(raw.Data, rev); err != nil {
		return nil, fmt.Errorf("decode revision %d: %w", seq, err)
	}
	return &Revision{Seq: raw.Sequence, MemoryRevision: rev}, nil
}

// List returns the newest n revisions of the scopes, newest first.
func (r *Revisions) List(ctx context.Context, scopes []Scope, n int) ([]Revision, error) {
	var out []Revision
	for _, s := range scopes {
		var upTo uint64
		for range n {
			m, ok, err := r.direct.LastUpTo(ctx, r.names.RevisionStream(), r.names.Revision(s), upTo)
			if err != nil {
				return nil, fmt.Errorf("revisions of %s: %w", s, err)
			}
			if !ok {
				break
			}
			rev := &nanofleetv1.MemoryRevision{}
			if err := proto.Unmarshal(m.Data, rev); err != nil {
				return nil, fmt.Errorf("decode revision %d: %w", m.Seq, err)
			}
			out = append(out, Revision{Seq: m.Seq, MemoryRevision: rev})
			if m.Seq <= 1 {
				break
			}
			upTo = m.Seq - 1
		}
	}
	slices.SortFunc(out, func(a, b Revision) int {
		switch {
		case a.Seq > b.Seq:
			return -1
		case a.Seq < b.Seq:
			return 1
		}
		return 0
	})
	if len(out) > n {
		out = out[:n]
	}
	return out, nil
}

// Restore undoes revision seq: every file it changed gets its content
// from before the revision back. allowed, when not nil, decides whether the
// caller may touch the revision's scope. The restore is itself a revision
// (returned), so it can be undone the same way.
func (r *Revisions) Restore(ctx context.Context, seq uint64, allowed func(Scope) bool) (*Revision, error) {
	old, err := r.Get(ctx, seq)
	if err != nil {
		return nil, err
	}
	s, err := ParseScope(old.GetScope())
	if err != nil {
		return nil, err
	}
	if allowed != nil && !allowed(s) {
		return nil, fmt.Errorf("%w: revision %d", ErrForbidden, seq)
	}
	rev := &nanofleetv1.MemoryRevision{
		Agent: old.GetAgent(), Scope: old.GetScope(), Kind: RevisionRestore, Restores: seq,
		Summary: fmt.Sprintf("restored the files revision %d changed", seq),
	}
	for _, c := range old.GetChanges() {
		before, err := r.setFile(ctx, s, c, c.GetBefore())
		if err != nil {
			return nil, err
		}
		if before == c.GetBefore() {
			continue
		}
		rev.Changes = append(rev.Changes, &nanofleetv1.FileChange{
			Bucket: c.GetBucket(), Key: c.GetKey(), Name: c.GetName(), Before: before, After: c.GetBefore(),
		})
	}
	if len(rev.Changes) == 0 {
		rev.Summary = fmt.Sprintf("revision %d: files already as they were before it", seq)
	}
	n, err := r.Append(ctx, rev, "")
	if err != nil {
		return nil, err
	}
	return &Revision{Seq: n, MemoryRevision: rev}, nil
}

// setFile writes content to the file a change names and returns what was
// there.
func (r *Revisions) setFile(ctx context.Context, s Scope, c *nanofleetv1.FileChange, content string) (string, error) {
	switch c.GetBucket() {
	case ChangeMemory:
		target, err := ParseScope(strings.TrimPrefix(c.GetKey(), "doc."))
		if err != nil || target != s {
			return "", fmt.Errorf("%w: change of %q outside the revision's scope", ErrForbidden, c.GetKey())
		}
		before, _, err := r.docs.SetContent(ctx, s, content, RevisionRestore)
		return before, err
	case ChangeProfile:
		return SetProfileFile(ctx, r.profile, c.GetKey(), content)
	}
	return "", fmt.Errorf("%w: change in unknown bucket %q", ErrInvalid, c.GetBucket())
}

// SetProfileFile writes content under key of the profile bucket with
// compare-and-set ([bus.Modify]: a write that lost is read and made
// again), and returns the content before. Empty content deletes the key.
func SetProfileFile(ctx context.Context, kv jetstream.KeyValue, key, content string) (string, error) {
	var before string
	_, err := bus.Modify(ctx, kv, key, func(old []byte, _ bool) ([]byte, error) {
		before = string(old)
		if content == "" {
			return nil, bus.ErrDelete
		}
		return []byte(content), nil
	})
	if err != nil {
		return "", fmt.Errorf("write %s: %w", key, err)
	}
	return before, nil
}

// LineDelta counts the lines added and removed between two texts, for
// "+3 −1" summaries (a multiset difference, not a minimal diff).
func LineDelta(before, after string) (added, removed int) {
	count := map[string]int{}
	for _, l := range splitLines(before) {
		count[l]++
	}
	for _, l := range splitLines(after) {
		if count[l] > 0 {
			count[l]--
			continue
		}
		added++
	}
	for _, n := range count {
		removed += n
	}
	return added, removed
}

func splitLines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// FormatRevision renders a revision for /dream-log and the CLI.
func FormatRevision(r Revision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d · %s · %s", r.Seq, formatTime(r.GetCreatedAt().AsTime()), r.GetKind())
	if r.GetRestores() > 0 {
		fmt.Fprintf(&b, " of #%d", r.GetRestores())
	}
	if s := strings.TrimSpace(r.GetSummary()); s != "" {
		b.WriteString("\n  " + s)
	}
	var files []string
	for _, c := range r.GetChanges() {
		a, d := LineDelta(c.GetBefore(), c.GetAfter())
		files = append(files, fmt.Sprintf("%s +%d −%d", c.GetName(), a, d))
	}
	if len(files) > 0 {
		b.WriteString("\n  " + strings.Join(files, " · "))
	}
	return b.String()
}
