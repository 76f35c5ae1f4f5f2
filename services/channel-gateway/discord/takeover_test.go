package discord_test

import (
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/channel-gateway/discord"
	"github.com/nanofleet/nanofleet/services/channel-gateway/discord/discordtest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/adaptertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/channelconfig"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/gatewaytest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

// TestTakeoverAfterCrash: the gateway holding the bot's connection dies
// (its NATS connection and its WebSocket drop, its lease is never
// released); another takes over once that lease expires and resumes the
// session, so the events sent meanwhile are answered, once each.
func TestTakeoverAfterCrash(t *testing.T) {
	fake := discordtest.New(t, token)
	fake.BotDiscriminator = "0042"
	srv := bustest.StartServer(t)
	b1, b2 := srv.Connect(t, "", channels.Assets), srv.Connect(t, "", channels.Assets)
	w := workertest.Start(t, b2, workertest.Echo)
	first := &gatewaytest.Logs{}
	second := &gatewaytest.Logs{}
	stopFirst := runAdapter(t, b1, fake, discord.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, slog.New(slog.NewTextHandler(first, &slog.HandlerOptions{Level: slog.LevelDebug})))
	first.WaitFor(t, "this gateway holds the account's connection lease", wait)
	fake.WaitConnected(t, wait)
	// The status is written before the connection is made.
	if rec := adaptertest.Status(t, b1, discord.Channel); rec.Account != "nanobot#0042" || rec.State != status.Connected {
		t.Errorf("status = %+v, want connected as nanobot#0042", rec)
	}
	runAdapter(t, b2, fake, discord.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}}}, slog.New(slog.NewTextHandler(second, &slog.HandlerOptions{Level: slog.LevelDebug})))
	second.WaitFor(t, "another gateway holds this account's connection", wait)

	fake.Send(discordtest.Message{ID: "600000000000000001", ChannelID: dmChannel, AuthorID: alice, Content: "one"})
	if c := fake.Next(t, wait, create); c.Content() != "echo: one" {
		t.Fatalf("before the crash got %q", c.Content())
	}
	// The first reply acknowledged: an ack lost with the crash would bring
	// it back to the second gateway only after the ack wait.
	gatewaytest.WaitDelivered(t, b1, discord.Channel, 1, wait)
	leases := bustest.WatchLeases(t, b2, discord.Channel+"-conn-")
	// The crash: no lease release, no close frame.
	b1.NC.Close()
	fake.Kill()
	stopFirst()
	fake.Send(discordtest.Message{ID: "600000000000000002", ChannelID: dmChannel, AuthorID: alice, Content: "two"})
	fake.Send(discordtest.Message{ID: "600000000000000003", ChannelID: dmChannel, AuthorID: alice, Content: "three"})
	// The second gateway takes over because the dead one's lease expired:
	// the lease shows it as the new holder, written after the TTL.
	_, to := leases.TakeoverAfterExpiry(t, bustest.TestLayout().LeaseTTL, wait)
	second.WaitFor(t, "this gateway holds the account's connection lease", wait)
	second.WaitFor(t, "owner="+to, wait)
	got := map[string]int{}
	for got["echo: two"] == 0 || got["echo: three"] == 0 {
		got[fake.Next(t, wait, create).Content()]++
	}
	if fake.Resumes() == 0 {
		t.Error("the second gateway did not resume the session")
	}
	// Nothing answered twice: the worker took each message once, and each
	// reply was created once. A last message is answered after whatever
	// came of the first three: the worker takes the chat's messages in
	// order.
	fake.Send(discordtest.Message{ID: "600000000000000004", ChannelID: dmChannel, AuthorID: alice, Content: "four"})
	for fake.Next(t, wait, create).Content() != "echo: four" {
	}
	// Every reply's delivery is over, the last answer's too: were one
	// created twice, both are among those counted.
	gatewaytest.WaitDelivered(t, b2, discord.Channel, 4, wait)
	if in := inboundIDs(w); in["600000000000000001"] != 1 || in["600000000000000002"] != 1 || in["600000000000000003"] != 1 {
		t.Errorf("worker took %v", in)
	}
	created := map[string]int{}
	for _, c := range fake.Created() {
		created[c.Content()]++
	}
	for _, k := range []string{"echo: one", "echo: two", "echo: three", "echo: four"} {
		if created[k] != 1 {
			t.Errorf("created %v, want each answer once", created)
			break
		}
	}
}

// inboundIDs counts the inbound messages the worker has taken so far.
func inboundIDs(w *workertest.Worker) map[string]int {
	got := map[string]int{}
	for len(w.Inbound) > 0 {
		got[(<-w.Inbound).GetId()]++
	}
	return got
}

// TestStreamingWithTwoGateways: two gateways run the channel; the deltas
// of a turn reach both, one message is created and edited, and the final
// text is the answer, whichever gateway delivers the reply.
func TestStreamingWithTwoGateways(t *testing.T) {
	fake := discordtest.New(t, token)
	srv := bustest.StartServer(t)
	b1, b2 := srv.Connect(t, "", channels.Assets), srv.Connect(t, "", channels.Assets)
	answer := strings.TrimSpace(strings.Repeat("streamed words ", 15))
	workertest.Start(t, b1, workertest.Streamed(answer, workertest.Deltas(answer)...))
	cfg := discord.Config{Common: channelconfig.Common{AllowFrom: []string{"*"}, Streaming: true, StreamEditInterval: 0.2}}
	logs := &gatewaytest.Logs{}
	runAdapter(t, b1, fake, cfg, slog.New(slog.NewTextHandler(logs, nil)))
	logs.WaitFor(t, "this gateway holds the account's connection lease", wait)
	runAdapter(t, b2, fake, cfg, slog.New(slog.NewTextHandler(logs, nil)))
	logs.WaitFor(t, "another gateway holds this account's connection", wait) // both follow the streams
	fake.WaitConnected(t, wait)
	for i, id := range []string{"600000000000000001", "600000000000000002", "600000000000000003"} {
		fake.Send(discordtest.Message{ID: id, ChannelID: dmChannel, AuthorID: alice, Content: "stream " + strconv.Itoa(i)})
	}
	// Three turns, one message each, each ending with the whole answer.
	// The fake records every call after applying it, so each change of
	// what it holds is followed by a call to wake on.
	timeout := time.After(wait)
	for {
		created, finished := fake.Created(), 0
		for _, c := range created {
			if fake.Text(c.MessageID) == answer {
				finished++
			}
		}
		if len(created) > 3 {
			t.Fatalf("%d messages created for 3 turns", len(created))
		}
		if finished == 3 {
			break
		}
		select {
		case <-fake.Calls():
		case <-timeout:
			t.Fatalf("after %s: %d messages, %d with the whole answer", wait, len(created), finished)
		}
	}
}
