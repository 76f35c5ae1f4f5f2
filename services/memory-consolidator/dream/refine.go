package dream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/llm"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/pkg/subject"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/internal/forcedtool"
)

// file is one file Dream may refine.
type file struct {
	field   string // JSON field of the answer
	name    string // for people
	bucket  string // memory.ChangeMemory or memory.ChangeProfile
	key     string
	content string
	rev     uint64
}

var skillName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// refine asks the model to refine one scope's files from its new entries,
// applies the changes by compare-and-set and stores the revision. It
// returns the revision number, or 0 when nothing changed.
func (j *Job) refine(ctx context.Context, sc memory.Scope, entries []memory.Entry, from, to uint64) (uint64, error) {
	doc, docRev, err := j.docs.Get(ctx, sc)
	if err != nil {
		return 0, err
	}
	files := []file{{field: "memory", name: "MEMORY.md", bucket: memory.ChangeMemory, key: memory.DocKey(sc), content: doc.GetContent(), rev: docRev}}
	var skills []file
	if sc.Kind == memory.KindAgent {
		for _, f := range []struct{ field, name string }{{"user", "USER.md"}, {"soul", "SOUL.md"}} {
			pf, err := j.profileFile(ctx, profile.FileKey(sc.Agent, f.name))
			if err != nil {
				return 0, err
			}
			pf.field, pf.name = f.field, f.name
			files = append(files, pf)
		}
		if skills, err = j.skills(ctx, sc.Agent); err != nil {
			return 0, err
		}
	}
	tool, schema := saveDream, saveDreamSchema
	if sc.Kind == memory.KindAgent {
		tool, schema = saveAgentDream, saveAgentDreamSchema
	}
	answer, err := forcedtool.Ask(ctx, j.d.Model, tool, llm.Request{
		Model: j.cfg.Model,
		Messages: []*nanofleetv1.ChatMessage{
			{Role: "system", Content: systemPrompt},
			{Role: "user", Content: prompt(sc, files, skills, entries)},
		},
		Temperature: 0.2,
		MaxTokens:   j.cfg.MaxTokens,
	})
	if err != nil {
		return 0, fmt.Errorf("dream model: %w", err)
	}
	obj, err := answer.Object(schema)
	if err != nil {
		// An answer that cannot be read (a call its schema rejects, or a
		// text without a JSON object) changes nothing; the entries stay
		// in the log and memory as it is. The model is not asked again:
		// it would likely answer the same.
		j.log.Warn("dream: unusable answer; scope left as it is", "scope", sc.Key(), "tool_called", answer.Called, "err", err)
		return 0, nil
	}
	rev := &nanofleetv1.MemoryRevision{
		Agent: sc.Agent, Scope: sc.Key(), Kind: memory.RevisionDream,
		Summary: strings.TrimSpace(str(obj["summary"])), EntriesFrom: from, EntriesTo: to, CreatedAt: now(),
	}
	changes := proposed(files, obj)
	if sc.Kind == memory.KindAgent {
		changes = append(changes, proposedSkills(sc, skills, obj["skills"])...)
	}
	if len(changes) == 0 {
		return 0, nil
	}
	if rev.Summary == "" {
		rev.Summary = fmt.Sprintf("refined memory from %d history entries", len(entries))
	}
	// Every change Dream makes can be undone from its revision, which
	// holds each file before and after. An answer whose revision the bus
	// cannot store would fail the same way at every fire, each asking the
	// model again: it is unusable, and nothing is written.
	for _, c := range changes {
		rev.Changes = append(rev.Changes, &nanofleetv1.FileChange{Bucket: c.f.bucket, Key: c.f.key, Name: c.f.name, Before: c.f.content, After: c.after})
	}
	if err := j.revs.Fits(ctx, rev); err != nil {
		if !errors.Is(err, memory.ErrTooLarge) {
			return 0, err
		}
		j.log.Warn("dream: answer too large to keep as a revision; scope left as it is", "scope", sc.Key(), "err", err)
		return 0, nil
	}
	rev.Changes = rev.Changes[:0]
	for _, c := range changes {
		if err := j.apply(ctx, sc, c.f, doc, c.after); err != nil {
			if errors.Is(err, memory.ErrConflict) {
				j.log.Info("dream: file edited meanwhile; its change is dropped", "file", c.f.name, "scope", sc.Key())
				continue
			}
			if bus.TooLarge(err) {
				j.log.Warn("dream: change too large to store; dropped", "file", c.f.name, "scope", sc.Key(), "err", err)
				continue
			}
			return 0, err
		}
		rev.Changes = append(rev.Changes, &nanofleetv1.FileChange{Bucket: c.f.bucket, Key: c.f.key, Name: c.f.name, Before: c.f.content, After: c.after})
	}
	if len(rev.Changes) == 0 {
		return 0, nil
	}
	return j.revs.Append(ctx, rev, fmt.Sprintf("dream:%s:%d-%d", sc.Key(), from, to))
}

// change is a new content the model proposed for a file.
type change struct {
	f     file
	after string
}

// proposed are the answer's changes to files: a non-empty text that
// differs from the file's.
func proposed(files []file, obj map[string]any) []change {
	var out []change
	for _, f := range files {
		after, ok := obj[f.field].(string)
		if !ok || strings.TrimSpace(after) == "" || trimEq(after, f.content) {
			continue
		}
		out = append(out, change{f: f, after: strings.TrimSpace(after) + "\n"})
	}
	return out
}

// apply writes one file by compare-and-set on the revision the model saw.
func (j *Job) apply(ctx context.Context, sc memory.Scope, f file, doc *nanofleetv1.MemoryDoc, after string) error {
	if f.bucket == memory.ChangeMemory {
		next := proto.Clone(doc).(*nanofleetv1.MemoryDoc)
		next.Content = after
		next.UpdatedAt = now()
		next.UpdatedBy = memory.RevisionDream
		_, err := j.docs.Put(ctx, sc, next, f.rev)
		return err
	}
	_, err := bus.CompareAndSet(ctx, j.profile, f.key, []byte(after), f.rev)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("%w: %s", memory.ErrConflict, f.name)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", f.name, err)
	}
	return nil
}

// proposedSkills are the answer's skills (a map of name to text): new
// ones and changed ones, under a valid name.
func proposedSkills(sc memory.Scope, current []file, v any) []change {
	m, _ := v.(map[string]any)
	names := slices.Sorted(maps.Keys(m))
	var out []change
	for _, name := range names {
		after, ok := m[name].(string)
		if !ok || strings.TrimSpace(after) == "" || !skillName.MatchString(name) {
			continue
		}
		f := file{name: "skill " + name, bucket: memory.ChangeProfile, key: profile.SkillKey(sc.Agent, name)}
		for _, c := range current {
			if c.key == f.key {
				f = c
			}
		}
		if trimEq(after, f.content) {
			continue
		}
		out = append(out, change{f: f, after: strings.TrimSpace(after) + "\n"})
	}
	return out
}

func (j *Job) profileFile(ctx context.Context, key string) (file, error) {
	f, err := profile.ReadFile(ctx, j.profile, key)
	if err != nil {
		return file{}, err
	}
	return file{bucket: memory.ChangeProfile, key: key, content: f.Content, rev: f.Rev}, nil
}

// skills returns the agent's skills within MaxSkillChars.
func (j *Job) skills(ctx context.Context, agent string) ([]file, error) {
	lister, err := j.profile.ListKeysFiltered(ctx, subject.Token(agent)+".skill.*")
	if err != nil {
		return nil, fmt.Errorf("list skills: %w", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []file
	total := 0
	for _, k := range keys {
		f, err := j.profileFile(ctx, k)
		if err != nil {
			return nil, err
		}
		name, err := subject.ParseToken(k[strings.LastIndexByte(k, '.')+1:])
		if err != nil || f.content == "" {
			continue
		}
		total += len(f.content)
		if total > j.cfg.MaxSkillChars {
			break
		}
		f.field, f.name = name, "skill "+name
		out = append(out, f)
	}
	return out, nil
}

// prompt is Dream's instruction.
func prompt(sc memory.Scope, files []file, skills []file, entries []memory.Entry) string {
	var b strings.Builder
	b.WriteString("Below are an AI assistant's long-term memory files and the conversation history entries written since you last looked. ")
	b.WriteString("Refine the files so they stay accurate, short and useful:\n")
	b.WriteString("- MEMORY.md (field \"memory\"): merge durable new facts from the entries; remove duplicates and facts the entries contradict or make outdated; keep what is still true; organise under headings.\n")
	if sc.Kind == memory.KindAgent {
		b.WriteString("- USER.md (field \"user\"): who the user is: name, preferences, ways of working.\n")
		b.WriteString("- SOUL.md (field \"soul\"): the assistant's personality and tone; change it only when the user asked for different behaviour.\n")
		b.WriteString("- skills (field \"skills\", an object of skill name to full SKILL.md): update a skill only when the entries show a better way to do its task; you may add a skill for a task the user keeps asking for.\n")
	}
	b.WriteString("\nCall the save_dream tool with \"summary\" (one sentence: what you changed and why) and ")
	if sc.Kind == memory.KindAgent {
		b.WriteString("\"memory\", \"user\", \"soul\": each file's full new content, or null to leave it unchanged; \"skills\": only the skills you add or change.\n")
	} else {
		b.WriteString("\"memory\": the file's full new content, or null to leave it unchanged.\n")
	}
	for _, f := range files {
		content := f.content
		if strings.TrimSpace(content) == "" {
			content = "(empty)"
		}
		fmt.Fprintf(&b, "\n## %s\n%s\n", f.name, content)
	}
	for _, s := range skills {
		fmt.Fprintf(&b, "\n## Skill %s\n%s\n", s.field, s.content)
	}
	b.WriteString("\n## New history entries\n")
	for _, e := range entries {
		b.WriteString("- " + strings.ReplaceAll(memory.FormatEntry(e.HistoryEntry), "\n", "\n  ") + "\n")
	}
	return b.String()
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
