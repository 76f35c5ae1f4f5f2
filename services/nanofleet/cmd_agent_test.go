package main

import (
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

// TestSendNamesAStoreThatFilledDuringThePublish: a disk filled at once
// (another process's file) makes the server drop the publish unanswered
// before the all-in-one's guard has looked at it; the walk's `agent -m`
// then said "publish: no ack in 10.001s (5 tries)". Asked again after the
// failure, the guard names the full store. Here the fleet's guard sees
// room at the first look and a full store at the next, and a sealed
// inbound stream refuses the publish.
func TestSendNamesAStoreThatFilledDuringThePublish(t *testing.T) {
	b := bustest.StartJetStream(t)
	var looks atomic.Int32
	sub, err := b.NC.Subscribe(b.Space.StorageState(), func(m *nats.Msg) {
		if looks.Add(1) == 1 {
			_ = m.Respond(nil) // room
			return
		}
		_ = m.Respond([]byte("storage full: the filesystem of /data has 0 KiB free of 64.0 MiB"))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	bustest.SealStream(t, b, b.Space.InboundStream())
	client, err := fleet.NewClient(t.Context(), b, "cli")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	cv := &conversation{fleet: &fleet.Fleet{Bus: b}, client: client, session: "cli:direct", chat: "direct", notices: io.Discard}
	_, err = cv.send(t.Context(), "hello", nil)
	if err == nil || !strings.Contains(err.Error(), "storage full: the filesystem of /data") || !strings.Contains(err.Error(), "free space there and send it again") {
		t.Errorf("send = %v, want it to name the full store", err)
	}
	if n := looks.Load(); n != 2 {
		t.Errorf("the guard was asked %d times, want 2 (before the publish and after it failed)", n)
	}
}
