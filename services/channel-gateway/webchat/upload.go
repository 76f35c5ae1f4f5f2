package webchat

import (
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"path"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/httpjson"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
)

// upload stores one file for the next message of a conversation. A file
// over the limit is refused with 413 and a message for the user.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !validID(id) {
		httpjson.Write(w, http.StatusNotFound, map[string]string{"error": "no such conversation"})
		return
	}
	// Files are stored under the conversation: none for one that does
	// not exist.
	if _, err := s.conversation(r.Context(), id); err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			httpjson.Write(w, http.StatusNotFound, map[string]string{"error": "no such conversation"})
			return
		}
		s.fail(w, err)
		return
	}
	limit := s.media.Limit()
	tooLarge := fmt.Sprintf("That file is too large: the limit is %s.", size(limit))
	if r.ContentLength > limit+64<<10 {
		httpjson.Write(w, http.StatusRequestEntityTooLarge, map[string]string{"error": tooLarge})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit+64<<10)
	mr, err := r.MultipartReader()
	if err != nil {
		httpjson.Write(w, http.StatusBadRequest, map[string]string{"error": "expected a multipart upload"})
		return
	}
	var part *multipart.Part
	for {
		part, err = mr.NextPart()
		if err != nil {
			httpjson.Write(w, http.StatusBadRequest, map[string]string{"error": "no file in the upload"})
			return
		}
		if part.FormName() == "file" {
			break
		}
	}
	name := path.Base(strings.ReplaceAll(part.FileName(), "\\", "/"))
	if name == "" || name == "." || name == "/" {
		name = "file"
	}
	object := fmt.Sprintf("web/%s/%s/%s", id, strings.ToLower(randID()), name)
	ref, err := s.media.Put(r.Context(), object, name, part.Header.Get("Content-Type"), part)
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, media.ErrTooLarge), errors.As(err, &mbe):
		httpjson.Write(w, http.StatusRequestEntityTooLarge, map[string]string{"error": tooLarge})
		return
	case err != nil:
		s.fail(w, err)
		return
	}
	_, _ = io.Copy(io.Discard, part)
	httpjson.Write(w, http.StatusCreated, map[string]any{"object": ref.GetObject(), "name": ref.GetName(), "size": ref.GetSize(), "mime": ref.GetMimeType()})
}

func size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
