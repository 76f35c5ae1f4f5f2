package media_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
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

// TestFetch is an attack on downloads: the server announces a size it
// does not send, sends more than the limit without announcing it, or
// never stops. Nothing over the limit is stored, and an endless body
// ends the download.
func TestFetch(t *testing.T) {
	const limit = 64
	b := bustest.StartJetStream(t)
	ctx := t.Context()
	s, err := media.Open(ctx, b, limit)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		n, _ := strconv.Atoi(q.Get("send"))
		if cl := q.Get("announce"); cl != "" {
			// Written by hand: net/http refuses a body unlike its length.
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %s\r\nConnection: close\r\n\r\n%s", cl, strings.Repeat("a", n))
			_ = buf.Flush()
			return
		}
		for sent := 0; n < 0 || sent < n; sent++ { // unannounced, chunked
			if _, err := w.Write([]byte("a")); err != nil {
				return // the client stopped reading
			}
		}
	}))
	defer srv.Close()
	tests := []struct {
		name     string
		query    string
		wantSize int64
		wantErr  bool
	}{
		{"announced and sent", "announce=10&send=10", 10, false},
		{"announces less than it sends", "announce=10&send=1000", 10, false},
		{"announces more than the limit", "announce=100000&send=10", 0, true},
		{"announces more than it sends", "announce=60&send=10", 0, true},
		{"sends over the limit unannounced", "send=65", 0, true},
		{"never stops", "send=-1", 0, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			object := fmt.Sprintf("test/fetch/%d", i)
			ref, err := s.Fetch(ctx, srv.Client(), srv.URL+"/?"+tt.query, nil, object, "f.txt", "")
			if (err != nil) != tt.wantErr {
				t.Fatalf("Fetch = %v, %v; want error %v", ref, err, tt.wantErr)
			}
			if err != nil {
				if _, err := s.Info(ctx, object); err == nil {
					t.Errorf("a refused download was stored")
				}
				return
			}
			if ref.GetSize() != tt.wantSize {
				t.Errorf("stored %d bytes, want %d", ref.GetSize(), tt.wantSize)
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

// TestLoad: a reply's attachment goes as its link when it is not stored,
// as its bytes when it is (named by its object when it has no name), and
// as a note for the user when it cannot go: gone from the store, empty, or
// over the platform's limit, announced (then not read) or once read. Only
// a failed read is an error, and a retryable one.
func TestLoad(t *testing.T) {
	const mb = 1 << 20
	srv := bustest.StartServer(t)
	ctx := t.Context()
	s, err := media.Open(ctx, srv.Connect(t, ""), 2*mb)
	if err != nil {
		t.Fatal(err)
	}
	for object, body := range map[string]string{"test/a.txt": "hello", "test/empty": "", "test/big.bin": strings.Repeat("x", mb+1)} {
		if _, err := s.Put(ctx, object, path.Base(object), "", strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	closed := srv.Connect(t, "")
	broken, err := media.Open(ctx, closed, 2*mb)
	if err != nil {
		t.Fatal(err)
	}
	closed.NC.Close()
	tests := []struct {
		name  string
		store *media.Store // s when nil
		ref   *nanofleetv1.MediaRef
		// limit is the platform's (0: none of its own).
		limit     int64
		want      *media.Outgoing
		wantRetry bool
	}{
		{name: "nothing", ref: &nanofleetv1.MediaRef{}},
		{name: "link", ref: &nanofleetv1.MediaRef{Url: "https://example.com/a.png", Name: "a.png"},
			want: &media.Outgoing{URL: "https://example.com/a.png"}},
		{name: "present", ref: &nanofleetv1.MediaRef{Object: "test/a.txt", Name: "b.txt", MimeType: "text/plain", Url: "https://example.com/b"}, limit: mb,
			want: &media.Outgoing{Name: "b.txt", MimeType: "text/plain", Data: []byte("hello")}},
		{name: "present, no name", ref: &nanofleetv1.MediaRef{Object: "test/a.txt"},
			want: &media.Outgoing{Name: "a.txt", Data: []byte("hello")}},
		{name: "gone", ref: &nanofleetv1.MediaRef{Object: "test/gone.pdf", Url: "https://example.com/c"},
			want: &media.Outgoing{Name: "gone.pdf", Note: "[attachment gone.pdf is no longer stored; not sent]"}},
		{name: "empty", ref: &nanofleetv1.MediaRef{Object: "test/empty", Name: "e.txt"},
			want: &media.Outgoing{Name: "e.txt", Note: "[attachment e.txt is empty; not sent]"}},
		{name: "stored over the limit, announced under it", ref: &nanofleetv1.MediaRef{Object: "test/big.bin", Size: 1}, limit: mb,
			want: &media.Outgoing{Name: "big.bin", Note: "[attachment big.bin is 1.0 MB, over Chat's 1 MB limit; not sent]"}},
		{name: "announced too large, not read", ref: &nanofleetv1.MediaRef{Object: "test/gone.zip", Name: "huge.zip", Size: 3 * mb}, limit: mb,
			want: &media.Outgoing{Name: "huge.zip", Note: "[attachment huge.zip is 3 MB, over Chat's 1 MB limit; not sent]"}},
		{name: "no limit of its own", ref: &nanofleetv1.MediaRef{Object: "test/big.bin", Size: mb + 1},
			want: &media.Outgoing{Name: "big.bin", Data: []byte(strings.Repeat("x", mb+1))}},
		{name: "store error", store: broken, ref: &nanofleetv1.MediaRef{Object: "test/a.txt", Name: "a.txt"}, wantRetry: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cmp.Or(tt.store, s).Load(ctx, tt.ref, "Chat", tt.limit)
			var de *gateway.DeliveryError
			if retry := errors.As(err, &de) && de.Retryable; retry != tt.wantRetry || (err != nil) != tt.wantRetry {
				t.Fatalf("Load error = %v; want a retryable delivery error: %v", err, tt.wantRetry)
			}
			if (got == nil) != (tt.want == nil) || got != nil &&
				(got.URL != tt.want.URL || got.Name != tt.want.Name || got.MimeType != tt.want.MimeType ||
					!bytes.Equal(got.Data, tt.want.Data) || got.Note != tt.want.Note) {
				t.Errorf("Load = %+v; want %+v", got, tt.want)
			}
		})
	}
}

// TestSendOrNote: an attachment sent is done; a failure the platform's
// classify makes worth a retry is returned, with no note; one it refuses
// for good becomes a note naming the attachment, and the attachment counts
// as sent, unless the note fails too. Every failure is logged.
func TestSendOrNote(t *testing.T) {
	errRefused, errNote := errors.New("413 too large"), errors.New("note refused")
	named := &nanofleetv1.MediaRef{Object: "replies/r1/0", Name: "a.png"}
	unnamed := &nanofleetv1.MediaRef{Object: "replies/r1/report.pdf"}
	tests := []struct {
		name      string
		ref       *nanofleetv1.MediaRef
		sendErr   error
		retryable bool // classify makes sendErr worth a retry
		noteErr   error
		wantErr   error // matched with errors.Is
		wantRetry bool
		wantNote  string
	}{
		{name: "sent", ref: named},
		{name: "worth a retry", ref: named, sendErr: errRefused, retryable: true, wantErr: errRefused, wantRetry: true},
		{name: "refused", ref: named, sendErr: errRefused, wantNote: "[attachment a.png was refused by Chat; not sent]"},
		{name: "refused, named by its object", ref: unnamed, sendErr: errRefused, wantNote: "[attachment report.pdf was refused by Chat; not sent]"},
		{name: "refused, and the note fails", ref: named, sendErr: errRefused, noteErr: errNote, wantErr: errNote,
			wantNote: "[attachment a.png was refused by Chat; not sent]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs strings.Builder
			log := slog.New(slog.NewTextHandler(&logs, nil))
			var classified error
			classify := func(err error) error {
				classified = err
				if tt.retryable {
					return gateway.Retry(err, 0)
				}
				return gateway.Permanent(err)
			}
			var notes []string
			err := media.SendOrNote(t.Context(), log, "Chat", tt.ref,
				func(context.Context) error { return tt.sendErr },
				classify,
				func(_ context.Context, text string) error {
					notes = append(notes, text)
					return tt.noteErr
				})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("SendOrNote = %v, want %v", err, tt.wantErr)
			}
			var de *gateway.DeliveryError
			if retry := errors.As(err, &de) && de.Retryable; retry != tt.wantRetry {
				t.Errorf("SendOrNote = %v: a retry: %t, want %t", err, retry, tt.wantRetry)
			}
			if classified != tt.sendErr {
				t.Errorf("classify got %v, want the send's error %v", classified, tt.sendErr)
			}
			var wantNotes []string
			if tt.wantNote != "" {
				wantNotes = []string{tt.wantNote}
			}
			if !slices.Equal(notes, wantNotes) {
				t.Errorf("notes %q, want %q", notes, wantNotes)
			}
			if logged := strings.Contains(logs.String(), "send attachment failed"); logged != (tt.sendErr != nil) {
				t.Errorf("failure logged: %t, want %t:\n%s", logged, tt.sendErr != nil, logs.String())
			}
		})
	}
}

type file string

func (f file) FileName() string { return string(f) }

// TestAttachAll: every file is tried, in order with its index; a failed
// one leaves a note and a log line, and only a message with neither text
// nor files is not worth publishing.
func TestAttachAll(t *testing.T) {
	for _, tt := range []struct {
		name, content string
		files         []file
		wantContent   string
		wantMedia     []string
		wantLogged    int
		want          bool
	}{
		{"text only", "hi", nil, "hi", nil, 0, true},
		{"nothing", "", nil, "", nil, 0, false},
		{"files", "", []file{"a.png", "b.pdf"}, "", []string{"0:a.png", "1:b.pdf"}, 0, true},
		{"one failed", "look", []file{"bad.png", "b.pdf"}, "look\n\n[attachment bad.png not downloaded]", []string{"1:b.pdf"}, 1, true},
		{"all failed, no text", "", []file{"bad.png"}, "[attachment bad.png not downloaded]", nil, 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs strings.Builder
			log := slog.New(slog.NewTextHandler(&logs, nil))
			msg := &nanofleetv1.InboundMessage{Content: tt.content}
			got := media.AttachAll(t.Context(), log, msg, tt.files, func(_ context.Context, i int, f file) (*nanofleetv1.MediaRef, error) {
				if strings.HasPrefix(string(f), "bad") {
					return nil, errors.New("boom")
				}
				return &nanofleetv1.MediaRef{Object: fmt.Sprintf("%d:%s", i, f)}, nil
			})
			var objects []string
			for _, m := range msg.Media {
				objects = append(objects, m.GetObject())
			}
			if got != tt.want || msg.Content != tt.wantContent || !slices.Equal(objects, tt.wantMedia) {
				t.Errorf("AttachAll = %v, content %q, media %v; want %v, %q, %v", got, msg.Content, objects, tt.want, tt.wantContent, tt.wantMedia)
			}
			if n := strings.Count(logs.String(), "attachment not downloaded"); n != tt.wantLogged {
				t.Errorf("%d failures logged, want %d:\n%s", n, tt.wantLogged, logs.String())
			}
		})
	}
}

type sized struct {
	name string
	size int64
}

func (f sized) FileName() string { return f.name }
func (f sized) FileSize() int64  { return f.size }

// TestDownloadAll: a file announced over the limit is not tried, a failed
// download is logged, and both leave a note saying why after the text.
func TestDownloadAll(t *testing.T) {
	s := media.NewStore(nil, 2<<20) // OverLimit reads only the limit
	for _, tt := range []struct {
		name, text string
		files      []sized
		wantText   string
		wantMedia  []string
		wantTried  []string
		wantLogged int
	}{
		{"text only", "hi", nil, "hi", nil, nil, 0},
		{"files", "", []sized{{"a.png", 10}, {"b.pdf", 2 << 20}}, "", []string{"0:a.png", "1:b.pdf"}, []string{"a.png", "b.pdf"}, 0},
		{"over the limit", "look", []sized{{"big.mp4", 3 << 20}, {"a.png", 10}}, "look\n\n[attachment big.mp4 not downloaded: 3 MB is over the 2 MB limit]", []string{"1:a.png"}, []string{"a.png"}, 0},
		{"failed, no text", "", []sized{{"bad.png", 10}, {"bad.pdf", 10}}, "[attachment bad.png not downloaded: download failed]\n[attachment bad.pdf not downloaded: download failed]", nil, []string{"bad.png", "bad.pdf"}, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs strings.Builder
			log := slog.New(slog.NewTextHandler(&logs, nil))
			var tried []string
			text, refs := media.DownloadAll(t.Context(), log, s, tt.text, tt.files, func(_ context.Context, i int, f sized) (*nanofleetv1.MediaRef, error) {
				tried = append(tried, f.name)
				if strings.HasPrefix(f.name, "bad") {
					return nil, errors.New("boom")
				}
				return &nanofleetv1.MediaRef{Object: fmt.Sprintf("%d:%s", i, f.name)}, nil
			})
			var objects []string
			for _, m := range refs {
				objects = append(objects, m.GetObject())
			}
			if text != tt.wantText || !slices.Equal(objects, tt.wantMedia) || !slices.Equal(tried, tt.wantTried) {
				t.Errorf("DownloadAll = %q, %v, tried %v; want %q, %v, %v", text, objects, tried, tt.wantText, tt.wantMedia, tt.wantTried)
			}
			if n := strings.Count(logs.String(), "attachment not downloaded"); n != tt.wantLogged {
				t.Errorf("%d failures logged, want %d:\n%s", n, tt.wantLogged, logs.String())
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
