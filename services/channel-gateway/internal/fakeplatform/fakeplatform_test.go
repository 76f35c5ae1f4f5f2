package fakeplatform_test

import (
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/fakeplatform"
)

type call struct{ kind, body string }

func TestNextSkipsOtherKinds(t *testing.T) {
	calls := fakeplatform.NewCalls("fake", func(c call) string { return c.kind })
	calls.Add(call{"token", ""})
	calls.Add(call{"send", "one"})
	calls.Add(call{"send", "two"})
	if c := calls.Next(t, time.Second, "send"); c.body != "one" {
		t.Fatalf("first send = %q, want one", c.body)
	}
	if c := calls.Next(t, time.Second, "edit", "send"); c.body != "two" {
		t.Fatalf("next send = %q, want two", c.body)
	}
	if n := len(calls.Chan()); n != 0 {
		t.Fatalf("%d calls left, want 0", n)
	}
}

func TestScriptTakesInOrderPerKind(t *testing.T) {
	var s fakeplatform.Script[int]
	if f := s.Take("send"); f != nil {
		t.Fatalf("empty script gave %d", *f)
	}
	s.Add("send", 429, 500)
	s.Add("edit", 400)
	for _, want := range []int{429, 500} {
		if f := s.Take("send"); f == nil || *f != want {
			t.Fatalf("Take(send) = %v, want %d", f, want)
		}
	}
	if f := s.Take("send"); f != nil {
		t.Fatalf("exhausted script gave %d", *f)
	}
	if f := s.Take("edit"); f == nil || *f != 400 {
		t.Fatalf("Take(edit) = %v, want 400", f)
	}
}
