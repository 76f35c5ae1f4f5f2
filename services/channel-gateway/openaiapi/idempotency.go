package openaiapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
)

// keyedPrefix starts the ids of requests that may repeat an earlier one.
const keyedPrefix = "api-k"

func newID() string { return "api-" + strings.ToLower(rand.Text()[:20]) }

// keyedID is the inbound id of a request identified by key in chat.
func keyedID(chat, kind string, key []byte) string {
	h := sha256.New()
	h.Write([]byte(chat + "\x00" + kind + "\x00"))
	h.Write(key)
	return keyedPrefix + hex.EncodeToString(h.Sum(nil)[:12])
}

// duplicateWindow is the inbound stream's duplicate window, within which
// a request with the same Idempotency-Key is the same message. It is read
// once: provisioning sets it at start-up.
func (s *Server) duplicateWindow(ctx context.Context) time.Duration {
	if d := s.dupWindow.Load(); d > 0 {
		return time.Duration(d)
	}
	ctx, cancel := context.WithTimeout(ctx, bus.CallTimeout)
	defer cancel()
	st, err := s.deps.Bus.JS.Stream(ctx, s.deps.Bus.Space.InboundStream())
	if err != nil || st.CachedInfo().Config.Duplicates <= 0 {
		return 10 * time.Minute // the layout's default
	}
	s.dupWindow.Store(int64(st.CachedInfo().Config.Duplicates))
	return st.CachedInfo().Config.Duplicates
}
