package media_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/media"
)

func TestPut(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx := t.Context()
	s, err := media.Open(ctx, b, 64)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, file, mime, body string
		wantMime               string
		wantErr                error
	}{
		{"given type", "a.bin", "application/pdf", "x", "application/pdf", nil},
		{"from extension", "notes.txt", "", "hello", "text/plain; charset=utf-8", nil},
		{"sniffed", "noext", "", "\x89PNG\r\n\x1a\n....", "image/png", nil},
		{"at the limit", "full", "text/plain", strings.Repeat("a", 64), "text/plain", nil},
		{"over the limit", "big", "text/plain", strings.Repeat("a", 65), "", media.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, err := s.Put(ctx, "test/"+tt.file, tt.file, tt.mime, strings.NewReader(tt.body))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Put error = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if ref.GetMimeType() != tt.wantMime || ref.GetSize() != int64(len(tt.body)) || ref.GetName() != tt.file {
				t.Errorf("ref = %v", ref)
			}
			info, err := s.Info(ctx, ref.GetObject())
			if err != nil || info.GetMimeType() != tt.wantMime || info.GetName() != tt.file {
				t.Errorf("Info = %v, %v", info, err)
			}
		})
	}
}

func TestAttach(t *testing.T) {
	ref := &nanofleetv1.MediaRef{Object: "o", Name: "a.png"}
	for _, tt := range []struct {
		name        string
		content     string
		err         error
		wantContent string
		wantMedia   int
	}{
		{"stored", "look", nil, "look", 1},
		{"failed, with text", "look", errors.New("boom"), "look\n\n[attachment a.png not downloaded]", 0},
		{"failed, no text", "", errors.New("boom"), "[attachment a.png not downloaded]", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			msg := &nanofleetv1.InboundMessage{Content: tt.content}
			media.Attach(msg, "a.png", ref, tt.err)
			if msg.Content != tt.wantContent || len(msg.Media) != tt.wantMedia {
				t.Errorf("content %q, %d media; want %q, %d", msg.Content, len(msg.Media), tt.wantContent, tt.wantMedia)
			}
		})
	}
}

func TestNotes(t *testing.T) {
	b := bustest.StartJetStream(t)
	s, err := media.Open(t.Context(), b, 20<<20)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, got, want string
	}{
		{"at the limit", s.OverLimit("a.pdf", 20<<20), ""},
		{"over the limit", s.OverLimit("a.pdf", 30<<20), "[attachment a.pdf not downloaded: 30 MB is over the 20 MB limit]"},
		{"download failed", media.NotDownloaded("a.pdf", errors.New("503")), "[attachment a.pdf not downloaded: download failed]"},
		{"too large once read", media.NotDownloaded("a.pdf", fmt.Errorf("put: %w", media.ErrTooLarge)), "[attachment a.pdf not downloaded: over the size limit]"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}
