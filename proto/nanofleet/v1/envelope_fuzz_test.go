package nanofleetv1_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/timestamppb"

	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// envelopeTypes are every message type of package nanofleet.v1, sorted by
// name so that a fuzz input's type index means the same from run to run.
func envelopeTypes() []protoreflect.MessageType {
	var types []protoreflect.MessageType
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if mt.Descriptor().ParentFile().Package() == "nanofleet.v1" {
			types = append(types, mt)
		}
		return true
	})
	slices.SortFunc(types, func(a, b protoreflect.MessageType) int {
		return strings.Compare(string(a.Descriptor().FullName()), string(b.Descriptor().FullName()))
	})
	return types
}

// envelopeSamples are filled-in envelopes: the seeds the fuzzer mutates.
func envelopeSamples() []proto.Message {
	now := timestamppb.Now()
	media := []*nanofleetv1.MediaRef{{Object: "o/1", MimeType: "image/png", Name: "a.png", Size: 42}}
	return []proto.Message{
		&nanofleetv1.InboundMessage{
			Id: "tg:1", Channel: "telegram", ChatId: "-100.5 *>", SenderId: "7", Content: "héllo <b>", Media: media,
			Metadata: map[string]string{"thread": "3", "": "x"}, ReceivedAt: now, SessionKey: "telegram:-100",
			Kind: nanofleetv1.InboundKind_INBOUND_KIND_USER, SenderName: "Ann",
		},
		&nanofleetv1.OutboundMessage{
			Id: "12:0", Channel: "slack", ChatId: "C1", Content: "**done**", Media: media,
			Kind: nanofleetv1.OutboundKind_OUTBOUND_KIND_FINAL, ReplyTo: "tg:1", SessionKey: "slack:C1",
			TurnId: "in12", CreatedAt: now, LastOfTurn: true, Metadata: map[string]string{"thread_ts": "1.2"},
		},
		&nanofleetv1.DeadLetter{Subject: "nanofleet.in.x.y", Reason: "malformed", Data: []byte{0xff, 0}, Deliveries: 3, FailedAt: now, StreamSeq: 9},
		&nanofleetv1.ToolRequest{CallId: "c1", Name: "read_file", ArgumentsJson: `{"path":"a"}`, SessionKey: "cli:x", TurnId: "in3"},
		&nanofleetv1.ToolResult{CallId: "c1", Content: "text", IsError: true, ErrorKind: nanofleetv1.ToolErrorKind_TOOL_ERROR_KIND_FAILED, Media: media},
		&nanofleetv1.TurnRecord{
			TurnId: "in3", InboundId: "tg:1", InboundSeq: 3, SessionKey: "cli:x", CompletedAt: now,
			Messages: []*nanofleetv1.ChatMessage{{Role: "user", Content: "hi"}, {Role: "assistant", ToolCalls: []*nanofleetv1.ToolCall{{Id: "c1", Name: "read_file", ArgumentsJson: "{}"}}}},
			Replies:  []*nanofleetv1.OutboundMessage{{Id: "3:0", Content: "ok", LastOfTurn: true}},
		},
		&nanofleetv1.TurnCheckpoint{TurnId: "in3", InboundSeq: 3, Iteration: 2, Attempts: 1, Messages: []*nanofleetv1.ChatMessage{{Role: "tool", ToolCallId: "c1", Content: "x"}}},
		&nanofleetv1.SessionInfo{SessionKey: "cli:x", Model: "m", CreatedAt: now, UpdatedAt: now, ConsolidatedSeq: 5, Turns: 6},
	}
}

// FuzzEnvelopeDecode decodes arbitrary bytes as each envelope type. It must
// never panic, and whatever decodes must survive a round trip: encoding it
// again (deterministically) and decoding that gives an equal message, and
// encoding is then a fixed point.
func FuzzEnvelopeDecode(f *testing.F) {
	types := envelopeTypes()
	if len(types) == 0 {
		f.Fatal("no message types registered for nanofleet.v1")
	}
	index := map[protoreflect.FullName]int{}
	for i, mt := range types {
		index[mt.Descriptor().FullName()] = i
	}
	for _, m := range envelopeSamples() {
		data, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(index[m.ProtoReflect().Descriptor().FullName()]), data)
	}
	for i := range types {
		f.Add(uint8(i), []byte{})
		f.Add(uint8(i), []byte{0x0a, 0x80})             // truncated length
		f.Add(uint8(i), []byte{0x0a, 0x02, 0xc3, 0x28}) // invalid UTF-8 in a string
		f.Add(uint8(i), []byte{0xf8, 0xff, 0xff, 0xff, 0x0f, 0x01})
	}
	det := proto.MarshalOptions{Deterministic: true}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		mt := types[int(which)%len(types)]
		m := mt.New().Interface()
		if err := proto.Unmarshal(data, m); err != nil {
			return
		}
		out, err := det.Marshal(m)
		if err != nil {
			t.Fatalf("%s decoded from %x does not encode: %v", mt.Descriptor().FullName(), data, err)
		}
		again := mt.New().Interface()
		if err := proto.Unmarshal(out, again); err != nil {
			t.Fatalf("%s: re-encoding %x does not decode: %v", mt.Descriptor().FullName(), out, err)
		}
		if !proto.Equal(m, again) {
			t.Fatalf("%s: round trip changed the message:\n%v\n%v", mt.Descriptor().FullName(), m, again)
		}
		if out2, err := det.Marshal(again); err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("%s: encoding is not a fixed point: %x vs %x (%v)", mt.Descriptor().FullName(), out, out2, err)
		}
	})
}
