package heartbeat_test

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/profile"
	"github.com/nanofleet/nanofleet/pkg/profile/profiletest"
	"github.com/nanofleet/nanofleet/pkg/schedule"
	"github.com/nanofleet/nanofleet/pkg/session"
	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
	"github.com/nanofleet/nanofleet/services/agent-worker/heartbeat"
	"github.com/nats-io/nats.go/jetstream"
)

type env struct {
	b     *bus.Bus
	sched *schedule.Scheduler
	cache *profile.Cache
}

func setup(t *testing.T) *env {
	t.Helper()
	b := bustest.StartJetStream(t)
	ctx := t.Context()
	if err := bus.Provision(ctx, b, bustest.TestLayout(), schedule.Assets); err != nil {
		t.Fatal(err)
	}
	s, err := schedule.Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	return &env{b: b, sched: s, cache: profiletest.Ready(ctx, t, b)}
}

func (e *env) service(t *testing.T, cfg heartbeat.Config) *heartbeat.Service {
	t.Helper()
	s, err := heartbeat.New(t.Context(), cfg, heartbeat.Deps{Bus: e.b, Scheduler: e.sched, Profiles: e.cache})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run runs a heartbeat service with cfg until the test ends.
func (e *env) run(t *testing.T, cfg heartbeat.Config) {
	t.Helper()
	svctest.Run(t, e.service(t, cfg).Run, svctest.StopWithin(10*time.Second))
}

func (e *env) setFile(t *testing.T, text string) {
	t.Helper()
	kv, _ := e.b.KV(t.Context(), bus.BucketProfile)
	if _, err := kv.Put(t.Context(), profile.FileKey("default", heartbeat.File), []byte(text)); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 5*time.Second, func() error {
		if e.cache.Get("default").Files[heartbeat.File] != text {
			return errors.New("profile cache did not see the file")
		}
		return nil
	})
}

func TestEnsure(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	cfg := heartbeat.DefaultConfig()
	if err := e.service(t, cfg).Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	j, err := e.sched.Get(ctx, heartbeat.SessionKey("default"), heartbeat.JobID)
	if err != nil || j.Spec.Every != 30*time.Minute || j.Kind != nanofleetv1.InboundKind_INBOUND_KIND_HEARTBEAT || j.Channel != heartbeat.Channel {
		t.Fatalf("job = %+v, %v", j, err)
	}
	// Unchanged config: the job (and its phase) stays.
	if err := e.service(t, cfg).Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if again, _ := e.sched.Get(ctx, heartbeat.SessionKey("default"), heartbeat.JobID); !again.Created.Equal(j.Created) {
		t.Error("unchanged heartbeat rescheduled")
	}
	cfg.Every = config.Seconds(time.Hour)
	if err := e.service(t, cfg).Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if changed, _ := e.sched.Get(ctx, heartbeat.SessionKey("default"), heartbeat.JobID); changed.Spec.Every != time.Hour {
		t.Errorf("interval = %s, want 1h", changed.Spec.Every)
	}
	cfg.Enabled = false
	if err := e.service(t, cfg).Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if jobs, _ := e.sched.List(ctx, ""); len(jobs) != 0 {
		t.Errorf("jobs after disabling: %v", jobs)
	}
}

func TestPrepare(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	cfg := heartbeat.DefaultConfig()
	cfg.KeepTurns = 2
	s := e.service(t, cfg)
	fire := func() *nanofleetv1.InboundMessage {
		return &nanofleetv1.InboundMessage{Channel: heartbeat.Channel, ChatId: "default", Kind: nanofleetv1.InboundKind_INBOUND_KIND_HEARTBEAT}
	}
	// No HEARTBEAT.md, or one without tasks: no turn.
	if ok, err := s.Prepare(ctx, fire()); ok || err != nil {
		t.Errorf("without a file: %v, %v", ok, err)
	}
	e.setFile(t, "## Active Tasks\n<!-- none -->\n")
	if ok, err := s.Prepare(ctx, fire()); ok || err != nil {
		t.Errorf("without tasks: %v, %v", ok, err)
	}
	// Other fires pass untouched.
	cron := &nanofleetv1.InboundMessage{Kind: nanofleetv1.InboundKind_INBOUND_KIND_CRON, Content: "x"}
	if ok, _ := s.Prepare(ctx, cron); !ok || cron.GetContent() != "x" {
		t.Errorf("cron fire: %v %q", ok, cron.GetContent())
	}

	store, err := session.Open(ctx, e.b)
	if err != nil {
		t.Fatal(err)
	}
	key := heartbeat.SessionKey("default")
	var last uint64
	for i := range 5 {
		if last, err = store.Append(ctx, key, &nanofleetv1.TurnRecord{TurnId: "t" + string(rune('0'+i))}, last); err != nil {
			t.Fatal(err)
		}
	}
	e.setFile(t, "## Active Tasks\n- check the inbox\n")
	in := fire()
	if ok, err := s.Prepare(ctx, in); !ok || err != nil {
		t.Fatalf("with tasks: %v, %v", ok, err)
	}
	if !strings.Contains(in.GetContent(), "- check the inbox") || !strings.Contains(in.GetContent(), heartbeat.OKToken) {
		t.Errorf("content = %q", in.GetContent())
	}
	hist, err := store.LoadHistory(ctx, key, 0)
	if err != nil || len(hist.Turns) != 2 || hist.LastSeq != last {
		t.Errorf("history after trim: %d turns, last %d (want 2, %d), %v", len(hist.Turns), hist.LastSeq, last, err)
	}
}

func TestActiveChats(t *testing.T) {
	e := setup(t)
	publish := func(channel, chat string) {
		data, _ := proto.Marshal(&nanofleetv1.OutboundMessage{Channel: channel, ChatId: chat, Content: "x"})
		bustest.Publish(t, e.b, e.b.Space.Outbound(channel, chat), data)
	}
	stream, err := e.b.JS.Stream(t.Context(), e.b.Space.OutboundStream())
	if err != nil {
		t.Fatal(err)
	}
	before := consumerNames(t, stream)
	if chats, err := heartbeat.ActiveChats(t.Context(), e.b, nil); err != nil || len(chats) != 0 {
		t.Errorf("empty fleet: %v %v", chats, err)
	}
	publish("telegram", "1")
	publish("slack", "C.9")
	publish("telegram", "1")
	publish("heartbeat", "default")
	tg, slack, hb := heartbeat.Chat{Channel: "telegram", ID: "1"}, heartbeat.Chat{Channel: "slack", ID: "C.9"}, heartbeat.Chat{Channel: "heartbeat", ID: "default"}
	tests := []struct {
		skip []string
		want []heartbeat.Chat
	}{
		{[]string{"heartbeat"}, []heartbeat.Chat{tg, slack}},
		{[]string{"heartbeat", "telegram"}, []heartbeat.Chat{slack}},
		{nil, []heartbeat.Chat{hb, tg, slack}},
	}
	for _, tt := range tests {
		chats, err := heartbeat.ActiveChats(t.Context(), e.b, tt.skip)
		if err != nil || !slices.Equal(chats, tt.want) {
			t.Errorf("skip %v: %v %v; want %v", tt.skip, chats, err, tt.want)
		}
	}
	// Each scan deletes the consumer it made.
	if after := consumerNames(t, stream); !slices.Equal(after, before) {
		t.Errorf("consumers on the outbound stream: %v after the scans, %v before", after, before)
	}
}

// TestActiveChatsBeyondOneFetch: a fleet with more chats than one fetch
// takes (256) gets each chat once, the most recent first, and the scan
// leaves no consumer behind. The scan's ordered consumer was made again
// for every fetch, delivering every message after the last one fetched
// instead of the last message of each chat: the second fetch listed the
// chats that talked again three times each, and the consumer it replaced
// was deleted in the background, after the scan had returned.
func TestActiveChatsBeyondOneFetch(t *testing.T) {
	e := setup(t)
	const chats, again = 300, 10
	publish := func(chat int) {
		data, _ := proto.Marshal(&nanofleetv1.OutboundMessage{Channel: "telegram", ChatId: strconv.Itoa(chat), Content: "x"})
		bustest.Publish(t, e.b, e.b.Space.Outbound("telegram", strconv.Itoa(chat)), data)
	}
	for chat := range chats {
		publish(chat)
	}
	// The last chats talk again: their earlier messages lie past the
	// first fetch too.
	for chat := chats - again; chat < chats; chat++ {
		publish(chat)
	}
	stream, err := e.b.JS.Stream(t.Context(), e.b.Space.OutboundStream())
	if err != nil {
		t.Fatal(err)
	}
	before := consumerNames(t, stream)
	got, err := heartbeat.ActiveChats(t.Context(), e.b, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]heartbeat.Chat, 0, chats)
	for chat := chats - 1; chat >= 0; chat-- {
		want = append(want, heartbeat.Chat{Channel: "telegram", ID: strconv.Itoa(chat)})
	}
	if !slices.Equal(got, want) {
		t.Errorf("%d chats, want %d; first %v, want %v", len(got), len(want), got[:min(4, len(got))], want[:4])
	}
	if after := consumerNames(t, stream); !slices.Equal(after, before) {
		t.Errorf("consumers on the outbound stream: %v after the scan, %v before", after, before)
	}
}

func consumerNames(t *testing.T, stream jetstream.Stream) []string {
	t.Helper()
	names, err := bustest.Consumers(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestOperators: the chat a notice goes to without notifyChat is one the
// operator is known to own: the fleet's only chat, or the latest of its
// terminal and web chats when no one else has been answered.
func TestOperators(t *testing.T) {
	tg := heartbeat.Chat{Channel: "telegram", ID: "1"}
	stranger := heartbeat.Chat{Channel: "telegram", ID: "2"}
	group := heartbeat.Chat{Channel: "slack", ID: "C9"}
	cli := heartbeat.Chat{Channel: "cli", ID: "direct"}
	web1, web2 := heartbeat.Chat{Channel: "web", ID: "a"}, heartbeat.Chat{Channel: "web", ID: "b"}
	tests := []struct {
		name  string
		chats []heartbeat.Chat
		want  heartbeat.Chat
	}{
		{"none yet", nil, heartbeat.Chat{}},
		{"one telegram chat", []heartbeat.Chat{tg}, tg},
		{"two people", []heartbeat.Chat{stranger, tg}, heartbeat.Chat{}},
		{"a group", []heartbeat.Chat{group, tg}, heartbeat.Chat{}},
		{"terminal and web conversations", []heartbeat.Chat{web2, cli, web1}, web2},
		{"terminal and a telegram chat", []heartbeat.Chat{cli, tg}, heartbeat.Chat{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := heartbeat.Operators(tt.chats); got != tt.want {
				t.Errorf("Operators(%v) = %v, want %v", tt.chats, got, tt.want)
			}
		})
	}
}

// TestNotifyNeedsOneChat: without notifyChannel, a notice goes to the
// chat the fleet replies to only while it is the fleet's one chat. Once a
// second person has been answered, the last chat may be theirs, and
// HEARTBEAT.md's notice goes to nobody rather than to them.
func TestNotifyNeedsOneChat(t *testing.T) {
	e := setup(t)
	e.run(t, heartbeat.DefaultConfig())
	reply := func(channel, chat, id string) uint64 {
		data, _ := proto.Marshal(&nanofleetv1.OutboundMessage{Id: id, Channel: channel, ChatId: chat, Content: "disk full",
			Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL})
		ack, err := e.b.JS.Publish(t.Context(), e.b.Space.Outbound(channel, chat), data)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	outbound, _ := bustest.Outbound(t, e.b, 100)
	reply("telegram", "owner", "r1")
	reply("telegram", "stranger", "r2")
	seq := reply(heartbeat.Channel, "default", "two-chats")
	// Once the notifier has acknowledged that reply, the stranger's chat
	// leaves the stream, and the next reply has one chat to go to.
	bustest.Eventually(t, 10*time.Second, func() error {
		c, err := e.b.JS.Consumer(t.Context(), e.b.Space.OutboundStream(), heartbeat.NotifyConsumer)
		if err != nil {
			return err
		}
		info, err := c.Info(t.Context())
		if err != nil {
			return err
		}
		if info.AckFloor.Stream < seq {
			return fmt.Errorf("the notifier acknowledged up to %d, not yet %d", info.AckFloor.Stream, seq)
		}
		return nil
	})
	stream, err := e.b.JS.Stream(t.Context(), e.b.Space.OutboundStream())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(t.Context(), jetstream.WithPurgeSubject(e.b.Space.Outbound("telegram", "stranger"))); err != nil {
		t.Fatal(err)
	}
	reply(heartbeat.Channel, "default", "one-chat")
	for {
		note := bustest.Receive(t, outbound, 10*time.Second)
		if !strings.HasPrefix(note.GetId(), "heartbeat:") {
			continue
		}
		if note.GetId() != "heartbeat:one-chat" || note.GetChatId() != "owner" {
			t.Fatalf("notice %q to %s:%s; want only heartbeat:one-chat, to telegram:owner", note.GetId(), note.GetChannel(), note.GetChatId())
		}
		break
	}
}

// TestNotifyDeadLettersUndecodable: a heartbeat reply that does not decode
// is dead-lettered with the reason, and the next reply still notifies.
func TestNotifyDeadLettersUndecodable(t *testing.T) {
	e := setup(t)
	cfg := heartbeat.DefaultConfig()
	cfg.NotifyChannel, cfg.NotifyChat = "telegram", "1"
	e.run(t, cfg)
	outbound, _ := bustest.Outbound(t, e.b, 100)
	subj := e.b.Space.Outbound(heartbeat.Channel, "default")
	for _, tt := range bustest.Malformed {
		t.Run(tt.Name, func(t *testing.T) {
			bustest.Publish(t, e.b, subj, tt.Data)
			good, _ := proto.Marshal(&nanofleetv1.OutboundMessage{Id: tt.Name, Channel: heartbeat.Channel, ChatId: "default",
				Content: "disk full", Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL})
			bustest.Publish(t, e.b, subj, good)
			// Replies are notified one at a time in stream order: once the
			// good one is, the bad one is done.
			for {
				note := bustest.Receive(t, outbound, 10*time.Second)
				if note.GetChannel() == "telegram" {
					if note.GetId() != "heartbeat:"+tt.Name || note.GetContent() != "disk full" {
						t.Fatalf("notice = %v", note)
					}
					break
				}
			}
			bustest.WantDeadLetter(t, e.b, "outbound", subj, tt.Data, "decode outbound message: ")
		})
	}
}
