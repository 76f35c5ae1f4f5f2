package worker_test

import (
	"encoding/json"
	"strconv"
	"strings"
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
	// B's naks as the worker sends them: the acks of its deliveries
	// (subject $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>…),
	// with the redelivery delay the worker asked for.
	naks := make(chan nak, 100)
	var seqB atomic.Uint64 // set once B is published; read by the handler
	sub, err := b.NC.Subscribe("$JS.ACK."+b.Space.InboundStream()+".workers.>", func(m *nats.Msg) {
		tok := strings.Split(m.Subject, ".")
		body, isNak := strings.CutPrefix(string(m.Data), "-NAK")
		if !isNak || len(tok) < 9 || tok[5] != strconv.FormatUint(seqB.Load(), 10) {
			return
		}
		var n nak
		n.deliveries, _ = strconv.ParseUint(tok[4], 10, 64)
		var opts struct {
			Delay time.Duration `json:"delay"`
		}
		if body = strings.TrimSpace(body); body != "" && json.Unmarshal([]byte(body), &opts) != nil {
			t.Errorf("nak %q: not a delay", m.Data)
		}
		n.delay = opts.Delay
		naks <- n
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
	for n := (nak{}); n.deliveries < 6; {
		n = bustest.Receive(t, naks, 30*time.Second)
	}
	closeA()
	bustest.Receive(t, askedB, 30*time.Second)
	// B's commit finds no history stream: a bus failure.
	if err := b.JS.DeleteStream(ctx, b.Space.HistoryStream()); err != nil {
		t.Fatal(err)
	}
	// The naks of B's waits behind A came before its start; the next is
	// the failed start's.
	for len(naks) > 0 {
		<-naks
	}
	closeB()
	// The nak that ends the failed start asks for the first start's
	// 1–2 s, not a later start's 4 s or more, whatever the deliveries.
	failed := bustest.Receive(t, naks, 30*time.Second)
	if failed.delay <= 0 || failed.delay > 2*time.Second {
		t.Errorf("B's failed start was put back for %s (delivery %d), want 1–2 s", failed.delay, failed.deliveries)
	}
	if err := bus.Provision(ctx, b, bustest.TestLayout()); err != nil {
		t.Fatal(err)
	}
	for answered := false; !answered; {
		answered = bustest.Receive(t, h.out, time.Minute).GetReplyTo() == "B"
	}
}

// nak is one nak of a message: which delivery it ended and the delay it
// asked for (0: none).
type nak struct {
	deliveries uint64
	delay      time.Duration
}
