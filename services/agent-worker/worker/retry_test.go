package worker_test

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// TestBusFailureRetryCountsStartsNotWaits: a turn that failed on the bus
// is retried after 1–2 s on its first start, however many times its
// message was delivered while it waited for its session. The wait was
// counted in deliveries, and each wait behind the FIFO guard or a lease
// is one: during a leader election on a 3-node cluster, a turn whose
// first start failed after a few such waits was retried 20–27 s later.
func TestBusFailureRetryCountsStartsNotWaits(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx := t.Context()
	releaseA, releaseB := make(chan struct{}), make(chan struct{})
	// Closed when the test returns at the latest, before the model's
	// server closes (it waits for the handlers), so a test failing early
	// does not hang there.
	closeA, closeB := sync.OnceFunc(func() { close(releaseA) }), sync.OnceFunc(func() { close(releaseB) })
	defer closeA()
	defer closeB()
	askedB := make(chan struct{}, 10)
	h := startOn(t, b, "w1")
	h.llm.Handle(func(r *llmtest.RecordedRequest) llmtest.Reply {
		switch r.LastMessage().Content {
		case "A":
			<-releaseA
		case "B":
			askedB <- struct{}{}
			<-releaseB
		}
		return llmtest.Text("answer")
	})
	naks := make(chan uint64, 100) // the deliveries each nak of B ends
	var seqB atomic.Uint64         // set once B is published; read by the advisories' handler
	sub, err := b.NC.Subscribe("$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED."+b.Space.InboundStream()+".workers", func(m *nats.Msg) {
		var a struct {
			StreamSeq  uint64 `json:"stream_seq"`
			Deliveries uint64 `json:"deliveries"`
		}
		if json.Unmarshal(m.Data, &a) == nil && a.StreamSeq == seqB.Load() {
			naks <- a.Deliveries
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	h.send(t, "c1", "A", "A")
	waitForModelRequest(t, h)
	// B waits behind A, delivered again and again.
	data, _ := proto.Marshal(&nanofleetv1.InboundMessage{Id: "B", Channel: "cli", ChatId: "c1", SenderId: "u", Content: "B"})
	m := nats.NewMsg(b.Space.Inbound("cli", "c1"))
	m.Data = data
	m.Header.Set(nats.MsgIdHdr, "cli:B")
	ack, err := b.JS.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	seqB.Store(ack.Sequence)
	for n := uint64(0); n < 6; {
		n = bustest.Receive(t, naks, 30*time.Second)
	}
	closeA()
	bustest.Receive(t, askedB, 30*time.Second)
	// B's commit finds no history stream: a bus failure.
	if err := b.JS.DeleteStream(ctx, b.Space.HistoryStream()); err != nil {
		t.Fatal(err)
	}
	closeB()
	n := bustest.Receive(t, naks, 30*time.Second)
	failed := time.Now()
	if err := bus.Provision(ctx, b, bustest.TestLayout()); err != nil {
		t.Fatal(err)
	}
	for answered := false; !answered; {
		answered = bustest.Receive(t, h.out, time.Minute).GetReplyTo() == "B"
	}
	if d := time.Since(failed); d > 8*time.Second {
		t.Errorf("B answered %s after its first start failed (delivery %d), want about 2 s", d.Round(time.Millisecond), n)
	}
	t.Logf("B answered %s after its first start failed (delivery %d)", time.Since(failed).Round(time.Millisecond), n)
}
