package openaiapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nanofleet/nanofleet/pkg/metakey"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/watch"
)

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err == nil {
		err = json.NewDecoder(bytes.NewReader(raw)).Decode(&req)
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			apiError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large",
				fmt.Sprintf("The request body is larger than %d MiB.", maxBodyBytes>>20))
			return
		}
		apiError(w, http.StatusBadRequest, "invalid_request_error", "", bodyError(err))
		return
	}
	text, err := req.lastUserText()
	if err == nil && strings.TrimSpace(text) == "" {
		err = fmt.Errorf("%w: the last user message is empty", errBadRequest)
	}
	if err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "", err.Error())
		return
	}
	if len(text) > gateway.MaxContentBytes {
		// Refused before watching the chat; a smaller limit from the
		// model's context window comes back from Publish.
		tooLarge(w, &gateway.TooLargeError{Size: len(text), Limit: gateway.MaxContentBytes})
		return
	}
	chat := r.Header.Get("X-Session-Id")
	if chat == "" {
		chat = req.User
	}
	if chat == "" {
		chat = "default"
	}
	if len(chat) > 128 {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "", "The session id is longer than 128 characters.")
		return
	}
	// A header may carry any bytes; the session id names a chat, and one
	// that is not UTF-8 would be stored under another name than the one
	// this request waits on.
	if !utf8.ValidString(chat) {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "", "The session id (X-Session-Id) is not valid UTF-8.")
		return
	}
	// The end user the client names (OpenAI's "user") is the sender:
	// user-scoped memory, usage and budgets are theirs, not one shared by
	// every conversation of the key.
	sender := cmp.Or(req.User, "api")
	if len(sender) > 128 {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "user", "The user is longer than 128 characters.")
		return
	}
	id := newID()
	var since time.Time
	// sdkAttempt is the attempt number an OpenAI SDK (Stainless) sends
	// with every request; -1 from other clients.
	sdkAttempt := -1
	if n, err := strconv.Atoi(r.Header.Get("X-Stainless-Retry-Count")); err == nil && n >= 0 {
		sdkAttempt = n
	}
	switch key := r.Header.Get("Idempotency-Key"); {
	case key != "":
		id = keyedID(chat, "key", []byte(key))
	case sdkAttempt >= 0:
		// The SDKs retry without a key, with the same body: the body is
		// the key. Attempt 0 is never taken for a retry (see below).
		id = keyedID(chat, "body", raw)
	}
	if strings.HasPrefix(id, keyedPrefix) {
		// A retry's publish is dropped as a duplicate within the inbound
		// stream's window, so its answer may already be out: read the
		// chat's replies from the start of that window.
		since = time.Now().Add(-s.duplicateWindow(r.Context()))
	}

	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	wch, err := watch.New(ctx, s.deps.Bus, Channel, chat, watch.WithSince(since), watch.WithLogger(s.log))
	if err != nil {
		s.log.Error("api watch", "err", err)
		apiError(w, http.StatusServiceUnavailable, "server_error", "", "The fleet is not reachable.")
		return
	}
	// It ends with ctx (cancelled when this handler returns), deleting its
	// consumer after the response is out.
	go func() { _ = wch.Run(ctx) }()
	in := &nanofleetv1.InboundMessage{
		Id: id, Channel: Channel, ChatId: chat, SenderId: sender, SenderName: req.User, Content: text,
		Metadata: map[string]string{"model": req.Model},
	}
	if req.Stream {
		in.Metadata[metakey.Stream] = "true" // asks the worker for deltas
	}
	dup, err := s.publish(ctx, in)
	if err == nil && dup && sdkAttempt == 0 && r.Header.Get("Idempotency-Key") == "" {
		// An SDK's first attempt whose body is already stored is the
		// same question asked again, not a retry: a turn of its own.
		in.Id = newID()
		id = in.Id
		_, err = s.publish(ctx, in)
	}
	if err != nil {
		s.log.Error("api message not published", "err", err)
		switch {
		case errors.Is(err, gateway.ErrStorageFull):
			storageFull(w)
		case errors.Is(err, gateway.ErrTooLarge):
			tooLarge(w, err)
		default:
			apiError(w, http.StatusServiceUnavailable, "server_error", "", "The fleet is not reachable.")
		}
		return
	}
	t := turn{s: s, w: w, id: "chatcmpl-" + strings.TrimPrefix(id, "api-"), created: time.Now().Unix(), stream: req.Stream, replay: !since.IsZero(),
		includeUsage: req.Stream && req.StreamOptions.IncludeUsage}
	t.run(ctx, wch, id)
}

// publish stores in, reporting whether it repeats a stored message.
func (s *Server) publish(ctx context.Context, in *nanofleetv1.InboundMessage) (duplicate bool, err error) {
	if st, ok := s.deps.Inbox.(interface {
		Store(context.Context, *nanofleetv1.InboundMessage) (bool, error)
	}); ok {
		return st.Store(ctx, in)
	}
	return false, s.deps.Inbox.Publish(ctx, in)
}
