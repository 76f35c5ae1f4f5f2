package fleet_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/discord/discordtest"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet/fleettest"
)

// TestDiscordGatewayKilledWhileHoldingTheLease: a nats-server process, an
// agent-worker, a tool-runner and two channel-gateway processes with the
// Discord channel. The gateway holding the bot's connection is SIGKILLed;
// the other takes the connection over once its lease expires, resumes the
// session, and every message, also those sent while no gateway was
// connected, is answered exactly once.
func TestDiscordGatewayKilledWhileHoldingTheLease(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	const token = "MP.discord.token"
	dc := discordtest.New(t, token)
	bins := fleettest.Build(t, "agent-worker", "tool-runner", "channel-gateway")
	nats := fleettest.StartNATS(t, t.TempDir())
	b := nats.Connect(t, bustest.TestLayout())
	llm := answering(t, "answer to ")
	cfgPath := fleettest.WriteConfig(t, testConfig(t, llm.URL(), map[string]any{"channels": map[string]any{
		"discord": map[string]any{"enabled": true, "token": token, "apiBase": dc.URL, "allowFrom": []string{"*"}},
		"web":     map[string]any{"enabled": false},
		"api":     map[string]any{"enabled": false},
	}}))
	ws := t.TempDir()
	common := []string{"--nats", nats.URL, "--config", cfgPath, "--http", ""}
	fleettest.Start(t, "tool-runner", bins.Path("tool-runner"), nil, append(common, "--log-level", "warn", "--workspace", ws)...)
	fleettest.Start(t, "worker", bins.Path("agent-worker"), nil, append(common, "--log-level", "warn", "--id", "w0", "--workspace", ws)...)
	gateway := func(name string) *fleettest.Proc {
		return fleettest.Start(t, name, bins.Path("channel-gateway"), nil,
			append(common, "--log-level", "info", "--listen", fmt.Sprintf("127.0.0.1:%d", bustest.FreePort(t)))...)
	}
	first := gateway("gateway-1")
	first.WaitOutput(t, "this gateway holds the account's connection lease", time.Minute)
	dc.WaitConnected(t, time.Minute)
	second := gateway("gateway-2")
	second.WaitOutput(t, "another gateway holds this account's connection", time.Minute)

	send := func(id, text string) {
		dc.Send(discordtest.Message{ID: id, ChannelID: "77", AuthorID: "42", Username: "ada", Content: text})
	}
	send("1001", "one")
	if c := dc.Next(t, time.Minute, "POST /channels/{id}/messages"); c.Content() != "answer to one" {
		t.Fatalf("before the kill: %q", c.Content())
	}
	// The first reply acknowledged: an ack lost with the kill would bring
	// it back to the second gateway only after the ack wait.
	waitDelivered(t, b, "discord", 1)
	leases := bustest.WatchLeases(t, b, "discord-conn-")
	first.Kill()
	send("1002", "two") // nobody is connected: Discord keeps them for a resume
	send("1003", "three")
	// The second gateway takes over because the killed one's lease
	// expired: the lease names it as the new holder, written after the TTL.
	_, to := leases.TakeoverAfterExpiry(t, bustest.TestLayout().LeaseTTL, time.Minute)
	second.WaitOutput(t, "this gateway holds the account's connection lease", time.Minute)
	second.WaitOutput(t, fmt.Sprintf(`"owner":%q`, to), time.Minute)
	got := map[string]bool{}
	for !got["answer to two"] || !got["answer to three"] {
		got[dc.Next(t, time.Minute, "POST /channels/{id}/messages").Content()] = true
	}
	// The three replies' deliveries are over: a message sent twice is
	// among those created.
	waitDelivered(t, b, "discord", 3)
	if dc.Resumes() == 0 {
		t.Error("the second gateway did not resume the session")
	}
	created := map[string]int{}
	for _, c := range dc.Created() {
		created[c.Content()]++
	}
	for _, k := range []string{"answer to one", "answer to two", "answer to three"} {
		if created[k] != 1 {
			t.Errorf("created %v, want each answer once", created)
			break
		}
	}
	if n := llm.RequestCount(); n != 3 {
		t.Errorf("the model was asked %d times for 3 messages", n)
	}
}
