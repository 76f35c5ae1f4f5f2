package adaptertest

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
)

// ConfigCase is a change to a valid config and the key that Validate must
// then name, "" when the changed config is still valid.
type ConfigCase[C any] struct {
	Name   string
	Change func(*C)
	Key    string
}

// Validate runs each case as a subtest: ok with the case's change either
// validates or fails naming the case's key.
func Validate[C interface{ Validate() error }](t *testing.T, ok C, cases []ConfigCase[C]) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			c := ok
			tt.Change(&c)
			err := c.Validate()
			if (err == nil) != (tt.Key == "") || (err != nil && !strings.Contains(err.Error(), tt.Key)) {
				t.Errorf("Validate() = %v, want error naming %q", err, tt.Key)
			}
		})
	}
}

// CommonConfigCases are the cases of the keys every channel shares, for
// the channel name keys are under (channels.<name>.) and common, which
// returns a config's shared keys: a valid config stays valid, a disabled
// one needs nothing, and Validate names a group policy it does not know
// and the allowlist policy without groups.
func CommonConfigCases[C any](name string, common func(*C) *channelconfig.Common) []ConfigCase[C] {
	p := "channels." + name + "."
	return []ConfigCase[C]{
		{Name: "valid", Change: func(*C) {}},
		{Name: "disabled needs nothing", Change: func(c *C) { var zero C; *c = zero }},
		{Name: "group policy", Change: func(c *C) { common(c).GroupPolicy = "all" }, Key: p + "groupPolicy"},
		{Name: "allowlist without groups", Change: func(c *C) { common(c).GroupPolicy = channelconfig.GroupAllowlist }, Key: p + "groupAllowFrom"},
	}
}

// Stored returns the one attachment of in and the bytes the object store
// on b holds for it, failing the test unless in has exactly one and it
// was stored.
func Stored(t *testing.T, b *bus.Bus, in *nanofleetv1.InboundMessage) (*nanofleetv1.MediaRef, []byte) {
	t.Helper()
	if len(in.GetMedia()) != 1 {
		t.Fatalf("inbound %v has %d attachments, want 1", in, len(in.GetMedia()))
	}
	ref := in.GetMedia()[0]
	blobs, err := b.Blobs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	data, err := blobs.GetBytes(t.Context(), ref.GetObject())
	if err != nil {
		t.Fatalf("stored attachment %s: %v", ref.GetObject(), err)
	}
	return ref, data
}

// Build constructs the adapter under test on b with the gateway's
// context, access gate and logger.
type Build func(ctx context.Context, b *bus.Bus, gate *access.Gate, log *slog.Logger) (gateway.Adapter, error)

// Refused runs a gateway with the adapter build returns, on a bus of its
// own, and fails the test unless the gateway stops within Wait with an
// error saying want: an adapter the platform refuses (credentials,
// permissions) must stop, saying why, rather than reconnect forever.
func Refused(t *testing.T, want string, build Build) {
	t.Helper()
	b := bustest.StartJetStream(t, channels.Assets)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	gate, err := access.Open(ctx, b, access.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	a, err := build(ctx, b, gate, log)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(gateway.DefaultConfig(), b, []gateway.Adapter{a}, gateway.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("gateway stopped with %v, want an error saying %q", err, want)
		}
	case <-time.After(Wait):
		t.Fatalf("the adapter still runs after %s", Wait)
	}
}

// PaddedTable is a Markdown table of rows short rows and one of wide
// words: it renders several times longer than it is, as a platform pads
// every row to the widest cell, which is what a length limit measured on
// the Markdown misses.
func PaddedTable(wide, rows int) string {
	lines := []string{"| n | note |", "|---|---|", "| 0 | " + strings.Repeat("wide ", wide) + "|"}
	for i := range rows {
		lines = append(lines, fmt.Sprintf("| %d | x |", i+1))
	}
	return strings.Join(lines, "\n")
}

// LiveCase is a progress or tool hint message and the one message a
// platform that sends it as plain text within limit shows for it.
type LiveCase struct {
	Name       string
	Kind       nanofleetv1.OutboundKind
	Text, Want string
}

// LiveCases are live messages at and over limit (UTF-16 units, as
// markup.Len counts; limit even and over 8): each arrives as one message
// within the limit, cut with "…" where it was longer, never inside a
// character.
func LiveCases(limit int) []LiveCase {
	words := strings.Repeat("word ", limit/5+2)
	at := "x" + words[:limit-1] // ends in a letter: platforms trim spaces
	return []LiveCase{
		{"short progress", nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS, "looking it up", "looking it up"},
		{"progress at the limit", nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS, at, at},
		{"long progress", nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS, words, words[:limit-1] + "…"},
		{"long tool hint", nanofleetv1.OutboundKind_OUTBOUND_KIND_TOOL_HINT, "exec(" + words + ")", ("exec(" + words)[:limit-1] + "…"},
		// Two units each: the cut falls between two of them.
		{"emoji outside the BMP", nanofleetv1.OutboundKind_OUTBOUND_KIND_PROGRESS, strings.Repeat("😀", limit), strings.Repeat("😀", limit/2-1) + "…"},
	}
}

// LiveScript answers a message whose content is the index of one of
// cases with that case's live message.
func LiveScript(cases []LiveCase) workertest.Script {
	return func(in *nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		i, _ := strconv.Atoi(in.GetContent())
		return []*nanofleetv1.OutboundMessage{workertest.Live(cases[i].Kind, cases[i].Text)}
	}
}

// Tail is the end of a long text, for a test's message.
func Tail(s string) string {
	r := []rune(s)
	return string(r[max(0, len(r)-12):])
}

// LimitCase is an answer of a test of a platform's size limits: a live
// message (progress, a tool hint) of Kind holding Content, or a final
// reply of Content and a last paragraph "END" that marks its last piece;
// it must arrive in Pieces messages (0: more than one, see [WantPieces]).
type LimitCase struct {
	Name    string
	Kind    nanofleetv1.OutboundKind
	Content string
	Pieces  int
}

// LimitScript answers each message with the case that index reads from
// its content.
func LimitScript(cases []LimitCase, index func(content string) int) workertest.Script {
	return func(in *nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		c := cases[index(in.GetContent())]
		if c.Kind == nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL {
			return []*nanofleetv1.OutboundMessage{workertest.Final(c.Content + "\n\nEND")}
		}
		return []*nanofleetv1.OutboundMessage{workertest.Live(c.Kind, c.Content)}
	}
}

// WantPieces fails the test unless a reply came in want pieces, or in
// more than one when want is 0.
func WantPieces(t *testing.T, got, want int) {
	t.Helper()
	if (want > 0 && got != want) || (want == 0 && got < 2) {
		t.Errorf("%d pieces, want %d (0: more than one)", got, want)
	}
}

// StreamCall is a post or an edit of an answer streamed by editing one
// message, as a platform's fake recorded it.
type StreamCall struct {
	// Edit is set for an edit of the streamed message, unset for a post.
	Edit bool
	Text string
	// Refused says what the platform refused ("chat.update of 40123
	// characters"), "" when it took the call.
	Refused string
}

// StreamedPieces reads the calls next returns for an answer ending in a
// paragraph "END" that a held worker streams, closing release once the
// stream is under way (the answer comes after its first call). It fails
// the test at a refused call, or unless the streamed message was edited
// and the rest of the answer posted in messages of its own.
func StreamedPieces(t *testing.T, release chan<- struct{}, next func() StreamCall) {
	t.Helper()
	var edits, posts int
	for {
		c := next()
		if c.Refused != "" {
			t.Fatalf("%s refused (after %d posts, %d edits)", c.Refused, posts, edits)
		}
		if c.Edit {
			edits++
		} else {
			posts++
		}
		if posts+edits == 1 {
			close(release)
		}
		if strings.HasSuffix(c.Text, "END") {
			break
		}
	}
	if edits == 0 || posts < 2 {
		t.Errorf("%d posts and %d edits, want the streamed message edited and the rest posted", posts, edits)
	}
}
