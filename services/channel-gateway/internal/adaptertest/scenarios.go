package adaptertest

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/memory"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
)

// everyone allows every sender.
var everyone = channelconfig.Common{AllowFrom: []string{"*"}}

// expect takes the next message sent and fails the test unless it is text.
func (h *harness) expect(t *testing.T, text string) Sent {
	t.Helper()
	s := h.fake.Next(t)
	if s.Text != text || s.Refused {
		t.Fatalf("sent %q (refused %v), want %q", s.Text, s.Refused, text)
	}
	return s
}

// Texts counts the texts of the next n messages f was sent; answers in
// different chats may come in either order.
func Texts(t *testing.T, f Fake, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		got[f.Next(t).Text]++
	}
	return got
}

// Run runs every scenario against p, each as a subtest.
func Run(t *testing.T, p Platform) {
	for _, s := range []struct {
		name string
		run  func(*testing.T, Platform)
	}{
		{"Reply", Reply},
		{"RepeatedEventAnsweredOnce", RepeatedEventAnsweredOnce},
		{"RateLimitWaitedOut", RateLimitWaitedOut},
		{"LongAnswerSplitOnParagraphs", LongAnswerSplitOnParagraphs},
		{"SplitReplyContinuesOnAnotherGateway", SplitReplyContinuesOnAnotherGateway},
		{"Strangers", Strangers},
		{"GroupPolicy", GroupPolicy},
		{"GroupsAreMarked", GroupsAreMarked},
		{"MalformedDropped", MalformedDropped},
	} {
		t.Run(s.name, func(t *testing.T) { s.run(t, p) })
	}
}

// Reply: a direct message reaches the worker with its id, chat and
// sender, and the answer goes back to that chat, referring to the message
// where the platform does.
func Reply(t *testing.T, p Platform) {
	h := start(t, p, everyone, workertest.Echo)
	id, chat := h.fake.DM(t, 1, Alice, "hello")
	in := h.worker.Next(t)
	if in.GetId() != id || in.GetChatId() != chat || in.GetContent() != "hello" {
		t.Errorf("inbound id %q chat %q content %q, want %q in %q", in.GetId(), in.GetChatId(), in.GetContent(), id, chat)
	}
	s := h.expect(t, "echo: hello")
	if s.Chat != chat || s.Quotes != p.Quotes.quotes(0) {
		t.Errorf("answer in %q quoting %v, want in %q quoting %v", s.Chat, s.Quotes, chat, p.Quotes.quotes(0))
	}
}

// RepeatedEventAnsweredOnce: an event the platform delivers twice is
// published once and answered once.
func RepeatedEventAnsweredOnce(t *testing.T, p Platform) {
	h := start(t, p, everyone, workertest.Echo)
	h.fake.DM(t, 7, Alice, "once")
	h.fake.DM(t, 7, Alice, "once")
	h.fake.DM(t, 8, Alice, "sentinel")
	if got := h.worker.ContentsUntil(t, "sentinel", Wait); len(got) != 2 {
		t.Errorf("worker got %q, want the repeated event once", got)
	}
	if got := Texts(t, h.fake, 2); got["echo: once"] != 1 || got["echo: sentinel"] != 1 {
		t.Errorf("answers = %v, want each once", got)
	}
}

// RateLimitWaitedOut: a send refused as over the rate limit is tried
// again no sooner than the platform asked, with the same idempotency key,
// and delivered once.
func RateLimitWaitedOut(t *testing.T, p Platform) {
	h := start(t, p, everyone, workertest.Echo)
	wait := h.fake.RateLimit(t, 0)
	first := time.Now()
	h.fake.DM(t, 1, Alice, "x")
	s, key := h.fake.Next(t), ""
	if s.Refused {
		first, key = s.At, s.Key
		s = h.fake.Next(t)
	}
	if s.Text != "echo: x" || s.Refused {
		t.Fatalf("sent %q (refused %v) after the refusal, want %q", s.Text, s.Refused, "echo: x")
	}
	if s.Key != key {
		t.Errorf("sent again with key %q, the refused send had %q", s.Key, key)
	}
	// 100 ms for the clocks of the fake and of the test.
	if d := s.At.Sub(first); d < wait-100*time.Millisecond {
		t.Errorf("sent again after %s; the platform asked for %s", d, wait)
	}
	// Sent once: the next thing sent is the next answer.
	h.fake.DM(t, 2, Alice, "sentinel")
	h.expect(t, "echo: sentinel")
}

// LongAnswerSplitOnParagraphs: an answer longer than the platform takes
// arrives in pieces within the limit, cut between paragraphs, each with a
// key of its own, referring to the message it answers as the platform
// does.
func LongAnswerSplitOnParagraphs(t *testing.T, p Platform) {
	answer := essay(p.Limit)
	h := start(t, p, everyone, func(*nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		return []*nanofleetv1.OutboundMessage{workertest.Final(answer)}
	})
	h.fake.DM(t, 1, Alice, "essay please")
	var pieces []string
	keys := map[string]bool{}
	for len(strings.Join(pieces, "\n\n")) < len(answer) {
		s := h.fake.Next(t)
		if n := len([]rune(s.Text)); n > p.Limit || n == 0 {
			t.Errorf("piece %d has %d characters; the limit is %d", len(pieces), n, p.Limit)
		}
		if !strings.HasSuffix(s.Text, "dolor.") {
			t.Errorf("piece %d not cut at a paragraph: …%q", len(pieces), s.Text[max(0, len(s.Text)-20):])
		}
		if s.Quotes != p.Quotes.quotes(len(pieces)) {
			t.Errorf("piece %d quotes the question: %v", len(pieces), s.Quotes)
		}
		if s.Key != "" && keys[s.Key] {
			t.Errorf("piece %d has the key of an earlier piece, %q", len(pieces), s.Key)
		}
		keys[s.Key] = true
		pieces = append(pieces, s.Text)
	}
	if len(pieces) < 3 {
		t.Errorf("%d pieces for %d characters, limit %d", len(pieces), len(answer), p.Limit)
	}
	if strings.Join(pieces, "\n\n") != answer {
		t.Error("the pieces do not add up to the answer")
	}
}

// essay is an answer of paragraphs that fills more than two and a half
// messages of limit.
func essay(limit int) string {
	para := strings.Repeat("lorem ipsum ", 8) + "dolor."
	var paras []string
	for len(strings.Join(paras, "\n\n")) < 2*limit+limit/2 {
		paras = append(paras, para)
	}
	return strings.Join(paras, "\n\n")
}

// SplitReplyContinuesOnAnotherGateway: the platform takes the first piece
// of a long answer and refuses the second as over its rate limit; the
// gateway stops before its retry, and the reply is redelivered to another
// gateway, which must continue after the first piece: the platform gets
// each piece exactly once, whether or not it has an idempotency key.
func SplitReplyContinuesOnAnotherGateway(t *testing.T, p Platform) {
	answer := essay(p.Limit)
	h := start(t, p, everyone, func(in *nanofleetv1.InboundMessage) []*nanofleetv1.OutboundMessage {
		if in.GetContent() == "essay please" {
			return []*nanofleetv1.OutboundMessage{workertest.Final(answer)}
		}
		return workertest.Echo(in)
	})
	h.fake.RateLimit(t, 1)
	h.fake.DM(t, 1, Alice, "essay please")
	first := h.fake.Next(t)
	if first.Refused {
		t.Fatal("the first piece was refused; the platform was to take it")
	}
	h.fake.Restart(t)
	pieces := []string{first.Text}
	for len(strings.Join(pieces, "\n\n")) < len(answer) {
		if s := h.fake.Next(t); !s.Refused {
			pieces = append(pieces, s.Text)
		}
	}
	if strings.Join(pieces, "\n\n") != answer {
		t.Errorf("the platform got %d pieces that do not add up to the answer; first %.30q…", len(pieces), pieces)
	}
	// Nothing more: the next thing sent is the next answer.
	h.fake.DM(t, 2, Alice, "sentinel")
	h.expect(t, "echo: sentinel")
}

var codeRE = regexp.MustCompile(`\b[A-HJ-NP-Z2-9]{8}\b`)

// Strangers: a stranger gets nothing in a group, not even a pairing code,
// and a pairing code in a DM; nothing of theirs is published until the
// code is approved, and then they are answered.
func Strangers(t *testing.T, p Platform) {
	h := start(t, p, channelconfig.Common{AllowFrom: []string{Owner}, GroupPolicy: channelconfig.GroupOpen}, workertest.Echo)
	h.fake.Group(t, 1, Stranger, "hi bot", true)
	_, dm := h.fake.DM(t, 2, Stranger, "hello?")
	s := h.fake.Next(t)
	code := codeRE.FindString(s.Text)
	if s.Chat != dm || code == "" {
		t.Fatalf("sent %q in %q, want a pairing code in the DM %q", s.Text, s.Chat, dm)
	}
	if err := access.Approve(t.Context(), h.bus, code); err != nil {
		t.Fatal(err)
	}
	if s := h.fake.Next(t); s.Chat != dm || !strings.Contains(s.Text, "approved") {
		t.Errorf("sent %q in %q, want the approval in the DM", s.Text, s.Chat)
	}
	id, _ := h.fake.DM(t, 3, Stranger, "now?")
	h.expect(t, "echo: now?")
	if in := h.worker.Next(t); in.GetId() != id {
		t.Errorf("first message published is %q %q, want the one after approval", in.GetId(), in.GetContent())
	}
}

// GroupPolicy: a group message is answered, in the group, as the policy
// says; direct messages are answered whatever it says.
func GroupPolicy(t *testing.T, p Platform) {
	tests := []struct {
		name    string
		common  channelconfig.Common
		mention bool
		reply   bool
		needs   bool // the platform must have the policy
	}{
		{"mention needed", channelconfig.Common{}, false, false, true},
		{"mentioned", channelconfig.Common{}, true, true, true},
		{"open", channelconfig.Common{GroupPolicy: channelconfig.GroupOpen}, false, true, true},
		{"allowlisted group", channelconfig.Common{GroupPolicy: channelconfig.GroupAllowlist, GroupAllowFrom: []string{p.Group}}, false, true, p.Allowlist},
		{"other group", channelconfig.Common{GroupPolicy: channelconfig.GroupAllowlist, GroupAllowFrom: []string{"other"}}, true, false, p.Allowlist},
		{"disabled", channelconfig.Common{GroupPolicy: channelconfig.GroupDisabled}, true, false, p.Disabled},
	}
	for _, tt := range tests {
		if !tt.needs {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			tt.common.AllowFrom = []string{"*"}
			h := start(t, p, tt.common, workertest.Echo)
			h.fake.Group(t, 1, Alice, "chatter", tt.mention)
			_, dm := h.fake.DM(t, 2, Alice, "sentinel")
			n := 1
			if tt.reply {
				n = 2
			}
			if got := h.worker.ContentsUntil(t, "sentinel", Wait); len(got) != n {
				t.Errorf("worker got %q", got)
			}
			got := map[string]string{} // chat of each answer
			for range n {
				s := h.fake.Next(t)
				if strings.HasSuffix(s.Text, "chatter") {
					s.Text = "chatter"
				}
				got[s.Text] = s.Chat
			}
			if got["echo: sentinel"] != dm || (tt.reply && got["chatter"] != p.Group) {
				t.Errorf("answers in %v, want the group's in %q", got, p.Group)
			}
		})
	}
}

// GroupsAreMarked: a group message carries the metadata by which memory
// knows a group ([memory.IsGroup]), and a direct message does not. In
// user scope a message not known for a group's gets its sender's personal
// memory, which the group would then read in the answers.
func GroupsAreMarked(t *testing.T, p Platform) {
	h := start(t, p, channelconfig.Common{AllowFrom: []string{"*"}, GroupPolicy: channelconfig.GroupOpen}, workertest.Echo)
	h.fake.Group(t, 1, Alice, "in the group", true)
	h.fake.DM(t, 2, Alice, "in private")
	for range 2 {
		in := h.worker.Next(t)
		group := strings.HasSuffix(in.GetContent(), "in the group")
		if memory.IsGroup(in) != group {
			t.Errorf("%q: memory.IsGroup = %v, want %v (metadata %v)", in.GetContent(), !group, group, in.GetMetadata())
		}
	}
}

// MalformedDropped: payloads the adapter cannot read are dropped with a
// log line, and the adapter goes on answering.
func MalformedDropped(t *testing.T, p Platform) {
	h := start(t, p, everyone, workertest.Echo)
	logged, n := h.fake.Malformed(t)
	h.logs.WaitFor(t, logged[0], Wait)
	h.fake.DM(t, 10, Alice, "still alive?")
	h.expect(t, "echo: still alive?")
	if got := h.worker.ContentsUntil(t, "still alive?", Wait); len(got) != 1 {
		t.Errorf("worker got %q, want only the good message", got)
	}
	// Each was dropped before the good message that followed was read.
	got := 0
	for _, l := range logged {
		got += h.logs.Count(l)
	}
	if got < n {
		t.Errorf("logged %q %d times, want %d:\n%s", logged, got, n, h.logs)
	}
}
