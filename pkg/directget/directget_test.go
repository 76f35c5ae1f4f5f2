package directget_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/directget"
)

// TestLastAndRange: the newest message on a subject comes back with its
// sequence, data and headers (the worker's FIFO guard compares replies by
// their Nats-Msg-Id); a subject with no message is not found; a range
// reads in order.
func TestLastAndRange(t *testing.T) {
	ctx := context.Background()
	b := bustest.StartJetStream(t)
	stream, subj := b.Space.OutboundStream(), b.Space.Outbound("cli", "c")
	for _, id := range []string{"t1:0", "t2:0"} {
		m := nats.NewMsg(subj)
		m.Data = []byte("reply " + id)
		m.Header.Set(nats.MsgIdHdr, id)
		if _, err := b.JS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	m, ok, err := directget.Last(ctx, b.NC, stream, subj)
	if err != nil || !ok {
		t.Fatalf("Last: %v, found %v", err, ok)
	}
	if got := m.Header.Get(nats.MsgIdHdr); got != "t2:0" || string(m.Data) != "reply t2:0" || m.Seq == 0 {
		t.Errorf("Last = seq %d, id %q, data %q; want the second reply", m.Seq, got, m.Data)
	}
	if _, ok, err := directget.Last(ctx, b.NC, stream, b.Space.Outbound("cli", "other")); err != nil || ok {
		t.Errorf("Last of an empty subject: found %v, err %v", ok, err)
	}
	all, err := directget.Range(ctx, b.NC, stream, subj, 1, 0, 0)
	if err != nil || len(all) != 2 || all[0].Header.Get(nats.MsgIdHdr) != "t1:0" || all[1].Seq <= all[0].Seq {
		t.Errorf("Range = %+v, %v", all, err)
	}
}
