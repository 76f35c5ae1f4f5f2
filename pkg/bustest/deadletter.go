package bustest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// Malformed is a set of payloads that do not decode as any of our
// messages, one per way a message can be broken, for dead-letter tests.
var Malformed = []struct {
	Name string
	Data []byte
}{
	{"truncated", []byte{0x0a, 0x05, 'a'}},
	{"invalid utf-8", []byte{0x0a, 0x01, 0xff}},
	{"not protobuf", []byte(`{"content":"json"}`)},
}

// Publish publishes data on subj through JetStream, failing the test if
// the stream does not take it.
func Publish(t testing.TB, b *bus.Bus, subj string, data []byte) {
	t.Helper()
	m := nats.NewMsg(subj)
	m.Data = data
	if _, err := b.JS.PublishMsg(t.Context(), m); err != nil {
		t.Fatalf("publish %s: %v", subj, err)
	}
}

// WantDeadLetter fails the test unless the newest dead letter of source
// holds data as sent on subj, with a reason starting with reason.
func WantDeadLetter(t testing.TB, b *bus.Bus, source, subj string, data []byte, reason string) {
	t.Helper()
	st, err := b.JS.Stream(t.Context(), b.Space.DeadLetterStream())
	if err != nil {
		t.Fatalf("dead-letter stream: %v", err)
	}
	raw, err := st.GetLastMsgForSubject(t.Context(), b.Space.DeadLetter(source))
	if err != nil {
		t.Fatalf("last dead letter of %s: %v", source, err)
	}
	dl := &nanofleetv1.DeadLetter{}
	if err := proto.Unmarshal(raw.Data, dl); err != nil {
		t.Fatalf("decode dead letter: %v", err)
	}
	if !bytes.Equal(dl.GetData(), data) || dl.GetSubject() != subj || !strings.HasPrefix(dl.GetReason(), reason) {
		t.Errorf("dead letter = %v; want %q from %s with reason %q…", dl, data, subj, reason)
	}
}
