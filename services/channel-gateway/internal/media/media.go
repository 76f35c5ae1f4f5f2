// Package media copies attachments from chat platforms into the fleet's
// object store, so that envelopes carry a small [nanofleetv1.MediaRef]
// instead of bytes, and reads a reply's attachments back for the
// platforms to send ([Store.Load]).
package media

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Store keeps attachments in an object store bucket.
type Store struct {
	obj   jetstream.ObjectStore
	limit int64
}

// NewStore returns a store writing to obj and refusing attachments over
// limit bytes.
func NewStore(obj jetstream.ObjectStore, limit int64) *Store {
	return &Store{obj: obj, limit: limit}
}

// Open returns a store in the fleet's object store (as [bus.Bus.Blobs]
// opens it) refusing attachments over limit bytes.
func Open(ctx context.Context, b *bus.Bus, limit int64) (*Store, error) {
	obj, err := b.Blobs(ctx)
	if err != nil {
		return nil, fmt.Errorf("media: %w", err)
	}
	return NewStore(obj, limit), nil
}

// Limit is the size limit in bytes.
func (s *Store) Limit() int64 { return s.limit }

// Put reads r (at most the limit) into the object called object and
// returns its reference. A missing MIME type is guessed from the file name
// and then from the content.
func (s *Store) Put(ctx context.Context, object, name, mimeType string, r io.Reader) (*nanofleetv1.MediaRef, error) {
	data, err := io.ReadAll(io.LimitReader(r, s.limit+1))
	if err != nil {
		return nil, fmt.Errorf("media: read %s: %w", name, err)
	}
	if int64(len(data)) > s.limit {
		return nil, fmt.Errorf("%w: %s is over %d bytes", ErrTooLarge, name, s.limit)
	}
	if mimeType == "" {
		mimeType = mime.TypeByExtension(strings.ToLower(path.Ext(name)))
	}
	if mimeType == "" {
		mimeType = http.DetectContentType(data)
	}
	meta := jetstream.ObjectMeta{Name: object, Description: name, Headers: map[string][]string{"Content-Type": {mimeType}}}
	if _, err := s.obj.Put(ctx, meta, bytes.NewReader(data)); err != nil {
		return nil, fmt.Errorf("media: store %s: %w", name, err)
	}
	return &nanofleetv1.MediaRef{Object: object, MimeType: mimeType, Name: name, Size: int64(len(data))}, nil
}

// Info returns the reference of a stored attachment.
func (s *Store) Info(ctx context.Context, object string) (*nanofleetv1.MediaRef, error) {
	info, err := s.obj.GetInfo(ctx, object)
	if err != nil {
		return nil, fmt.Errorf("media: %s: %w", object, err)
	}
	return &nanofleetv1.MediaRef{
		Object: object, Name: info.Description, Size: int64(info.Size),
		MimeType: info.Headers.Get("Content-Type"),
	}, nil
}

// Fetch downloads url with client (at most the limit) and stores it.
func (s *Store) Fetch(ctx context.Context, client *http.Client, url string, header http.Header, object, name, mimeType string) (*nanofleetv1.MediaRef, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("media: %w", err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("media: download %s: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("media: download %s: %s", name, resp.Status)
	}
	if resp.ContentLength > s.limit {
		return nil, fmt.Errorf("%w: %s is %d bytes, over %d", ErrTooLarge, name, resp.ContentLength, s.limit)
	}
	return s.Put(ctx, object, name, mimeType, resp.Body)
}

// OverLimit is the note telling the model that attachment name, of size
// bytes as the platform announced it, was not downloaded for being over
// the limit; "" when it is not over.
func (s *Store) OverLimit(name string, size int64) string {
	if size <= s.limit {
		return ""
	}
	return fmt.Sprintf("[attachment %s not downloaded: %d MB is over the %d MB limit]", name, size>>20, s.limit>>20)
}

// NotDownloaded is the note telling the model that attachment name was
// not downloaded, err saying why.
func NotDownloaded(name string, err error) string {
	reason := "download failed"
	if errors.Is(err, ErrTooLarge) {
		reason = "over the size limit"
	}
	return fmt.Sprintf("[attachment %s not downloaded: %s]", name, reason)
}

// Attach adds ref to msg's media or, when the download failed (err set),
// a note in its text naming the attachment, so the model knows one is
// missing instead of never hearing of it.
func Attach(msg *nanofleetv1.InboundMessage, name string, ref *nanofleetv1.MediaRef, err error) {
	if err != nil {
		msg.Content = strings.TrimSpace(msg.Content + "\n\n[attachment " + name + " not downloaded]")
		return
	}
	msg.Media = append(msg.Media, ref)
}
