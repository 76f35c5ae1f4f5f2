package media

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"

	"github.com/nats-io/nats.go/jetstream"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// MemoryLimit is the limit an adapter passes to [Store.Load] when its
// platform takes files far larger than a gateway should read whole into
// memory to send (Slack 1 GB, WhatsApp 2 GB for a document): 50 MB, the
// largest limit of a platform that takes less (Telegram's Bot API, for a
// document).
const MemoryLimit = 50 << 20

// Outgoing is an attachment of a reply as a platform is to send it: a
// link, a stored file, or the note telling the user why it is not sent.
type Outgoing struct {
	// URL is an attachment's that is not stored: it goes as a link.
	URL string
	// Name is a stored attachment's name ([Name]), MimeType its content
	// type as the reply gives it, and Data its bytes.
	Name, MimeType string
	Data           []byte
	// Note, when set, is what the chat is told instead of the file ([Note]):
	// the attachment is gone from the store, empty, or over the platform's
	// limit. Sending it again would not help.
	Note string
}

// Name is the file name a stored attachment m is sent under: its own,
// else the last element of its object's name.
func Name(m *nanofleetv1.MediaRef) string {
	if m.GetName() != "" {
		return m.GetName()
	}
	return path.Base(m.GetObject())
}

// Note is what a chat is told of attachment name not sent, why saying
// what is wrong with it ("is empty").
func Note(name, why string) string {
	return fmt.Sprintf("[attachment %s %s; not sent]", name, why)
}

// SendOrNote sends attachment m of a reply to platform (its name, as
// notes give it) with send. Only a failure worth a retry, as classify
// makes it a [gateway.DeliveryError], stops the reply and is returned. One
// the platform refuses would be refused again: the chat is told with note
// ([Note]: "was refused by <platform>") and the attachment counts as
// sent. log, the caller's, records the failure.
func SendOrNote(ctx context.Context, log *slog.Logger, platform string, m *nanofleetv1.MediaRef,
	send func(context.Context) error, classify func(error) error, note func(ctx context.Context, text string) error) error {
	err := send(ctx)
	if err == nil {
		return nil
	}
	log.Warn("send attachment failed", "name", m.GetName(), "err", err)
	de := classify(err)
	if retry, _ := gateway.Retryable(de); retry {
		return de
	}
	return note(ctx, Note(Name(m), "was refused by "+platform))
}

// Load reads attachment m of a reply for platform (its name, as notes
// give it), which takes files of at most limit bytes (0: no limit of its
// own). It returns nil when there is nothing to send (neither a stored
// file nor a link), and an Outgoing with a Note for a file that cannot
// be sent: one announced over the limit is not read. Its only error is a
// failed read, a retryable [gateway.DeliveryError]: the store may answer
// later.
func (s *Store) Load(ctx context.Context, m *nanofleetv1.MediaRef, platform string, limit int64) (*Outgoing, error) {
	if m.GetObject() == "" {
		if m.GetUrl() == "" {
			return nil, nil
		}
		return &Outgoing{URL: m.GetUrl()}, nil
	}
	f := &Outgoing{Name: Name(m), MimeType: m.GetMimeType()}
	if limit > 0 && m.GetSize() > limit {
		f.Note = Note(f.Name, overLimit(m.GetSize(), platform, limit))
		return f, nil
	}
	data, size, err := s.readUpTo(ctx, m.GetObject(), limit)
	switch {
	case errors.Is(err, jetstream.ErrObjectNotFound):
		f.Note = Note(f.Name, "is no longer stored")
	case err != nil:
		return nil, gateway.Retry(fmt.Errorf("read attachment %s: %w", m.GetObject(), err), 0)
	case size == 0:
		f.Note = Note(f.Name, "is empty")
	case limit > 0 && size > limit:
		f.Note = Note(f.Name, overLimit(size, platform, limit))
	default:
		f.Data = data
	}
	return f, nil
}

// readUpTo reads object whole unless the size the store gives for it is
// over limit (0: none), and then returns only that size: a reference may
// announce less than was stored, and the gateway, outside the sandbox,
// must not read into memory what it will not send.
func (s *Store) readUpTo(ctx context.Context, object string, limit int64) ([]byte, int64, error) {
	r, err := s.obj.Get(ctx, object)
	if err != nil {
		return nil, 0, fmt.Errorf("media: read %s: %w", object, err)
	}
	defer r.Close()
	info, err := r.Info()
	if err != nil {
		return nil, 0, fmt.Errorf("media: read %s: %w", object, err)
	}
	if size := int64(info.Size); limit > 0 && size > limit {
		return nil, size, nil
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, 0, fmt.Errorf("media: read %s: %w", object, err)
	}
	return data, int64(len(data)), nil
}

// overLimit says that size is over platform's limit, in megabytes as
// platforms state their limits.
func overLimit(size int64, platform string, limit int64) string {
	return fmt.Sprintf("is %s, over %s's %s limit", mb(size), platform, mb(limit))
}

// mb formats a size in megabytes.
func mb(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MB", n>>20)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
}
