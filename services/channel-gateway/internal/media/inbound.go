package media

import (
	"context"
	"log/slog"
	"strings"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// A File is a platform's description of one file of an inbound message.
type File interface {
	// FileName is the name the note of a failed download gives.
	FileName() string
}

// AttachAll downloads each of files (download gets its index too) and
// attaches it to msg as [Attach] does, logging each download that failed.
// It reports whether msg is worth publishing: it has text or media, which
// a message with neither text nor files has not.
func AttachAll[F File](ctx context.Context, log *slog.Logger, msg *nanofleetv1.InboundMessage, files []F, download func(context.Context, int, F) (*nanofleetv1.MediaRef, error)) bool {
	for i, f := range files {
		ref, err := download(ctx, i, f)
		if err != nil {
			log.Warn("attachment not downloaded", "name", f.FileName(), "err", err)
		}
		Attach(msg, f.FileName(), ref, err)
	}
	return msg.Content != "" || len(msg.Media) > 0
}

// A Sized file is one whose size the platform announces with the message.
type Sized interface {
	File
	// FileSize is the size announced, in bytes.
	FileSize() int64
}

// DownloadAll downloads each of files not announced over s's limit
// (download gets its index too) and returns text, followed by a note for
// the model on each file it could not have ([Store.OverLimit],
// [NotDownloaded]), and the references of those stored; each download
// that failed is logged. Unlike [AttachAll], it does not try a file
// announced too large, and its notes say why a file is missing.
func DownloadAll[F Sized](ctx context.Context, log *slog.Logger, s *Store, text string, files []F, download func(context.Context, int, F) (*nanofleetv1.MediaRef, error)) (string, []*nanofleetv1.MediaRef) {
	var refs []*nanofleetv1.MediaRef
	var notes []string
	for i, f := range files {
		if note := s.OverLimit(f.FileName(), f.FileSize()); note != "" {
			notes = append(notes, note)
			continue
		}
		ref, err := download(ctx, i, f)
		if err != nil {
			log.Warn("attachment not downloaded", "name", f.FileName(), "err", err)
			notes = append(notes, NotDownloaded(f.FileName(), err))
			continue
		}
		refs = append(refs, ref)
	}
	if len(notes) > 0 {
		text = strings.TrimSpace(text + "\n\n" + strings.Join(notes, "\n"))
	}
	return text, refs
}
