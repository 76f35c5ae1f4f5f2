package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/subject"
)

// Links is the identity-link table: which person each channel sender is,
// so that in user scope one person's memory follows them from, say,
// telegram:123 to slack:U456. A sender without a link is a person of its
// own, named "<channel>:<sender id>".
type Links struct {
	kv jetstream.KeyValue
}

// Link joins a channel sender to a person.
type Link struct {
	Channel  string
	SenderID string
	Person   string
}

// OpenLinks returns the link table of the fleet b belongs to.
func OpenLinks(ctx context.Context, b *bus.Bus) (*Links, error) {
	kv, err := b.KV(ctx, bus.BucketMemory)
	if err != nil {
		return nil, err
	}
	return &Links{kv: kv}, nil
}

// Link records that the sender on channel is person. Memory the sender
// had as an unlinked person stays where it was.
func (l *Links) Link(ctx context.Context, channel, senderID, person string) error {
	if channel == "" || senderID == "" {
		return fmt.Errorf("%w: channel and sender id are required", ErrInvalid)
	}
	if err := validPerson(person); err != nil {
		return err
	}
	if _, err := l.kv.Put(ctx, LinkKey(channel, senderID), []byte(person)); err != nil {
		return fmt.Errorf("link %s:%s: %w", channel, senderID, err)
	}
	return nil
}

// Unlink removes the sender's link; the sender is its own person again.
func (l *Links) Unlink(ctx context.Context, channel, senderID string) error {
	err := l.kv.Delete(ctx, LinkKey(channel, senderID))
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("unlink %s:%s: %w", channel, senderID, err)
	}
	return nil
}

// Person returns who the sender on channel is.
func (l *Links) Person(ctx context.Context, channel, senderID string) (string, error) {
	e, err := bus.Get(ctx, l.kv, LinkKey(channel, senderID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return channel + ":" + senderID, nil
	}
	if err != nil {
		return "", fmt.Errorf("read link %s:%s: %w", channel, senderID, err)
	}
	return string(e.Value()), nil
}

// List returns every link, sorted by person then channel and sender.
func (l *Links) List(ctx context.Context) ([]Link, error) {
	lister, err := l.kv.ListKeysFiltered(ctx, "link.>")
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	var out []Link
	for key := range lister.Keys() {
		parts := strings.Split(key, ".")
		if len(parts) != 3 {
			continue
		}
		ch, err1 := subject.ParseToken(parts[1])
		id, err2 := subject.ParseToken(parts[2])
		if err1 != nil || err2 != nil {
			continue
		}
		e, err := bus.Get(ctx, l.kv, key)
		if err != nil {
			continue
		}
		out = append(out, Link{Channel: ch, SenderID: id, Person: string(e.Value())})
	}
	slices.SortFunc(out, func(a, b Link) int {
		return strings.Compare(a.Person+"\x00"+a.Channel+"\x00"+a.SenderID, b.Person+"\x00"+b.Channel+"\x00"+b.SenderID)
	})
	return out, nil
}

func validPerson(p string) error {
	if p == "" || len(p) > 128 {
		return fmt.Errorf("%w: person must be 1-128 bytes", ErrInvalid)
	}
	for _, r := range p {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: person %q has a control character", ErrInvalid, p)
		}
	}
	return nil
}
