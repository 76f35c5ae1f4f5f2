package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/memory"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

func TestMemory(t *testing.T) {
	ctx := t.Context()
	b := bustest.StartJetStream(t)
	if err := bus.Provision(ctx, b, bustest.TestLayout(), memory.Assets); err != nil {
		t.Fatal(err)
	}
	docs, _ := memory.OpenDocs(ctx, b)
	ada := memory.UserScope("default", "ada")
	if _, _, err := docs.SetContent(ctx, ada, "- Ada likes tea", "operator"); err != nil {
		t.Fatal(err)
	}
	log := memory.OpenLog(b)
	for i, text := range []string{"Ada ordered green tea.", "Ada asked about trains."} {
		if _, err := log.Append(ctx, &nanofleetv1.HistoryEntry{SessionKey: "tg:" + string(rune('1'+i)), Scope: ada.Key(), FromSeq: 1, ToSeq: 2, Text: text}, 0); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		args []string
		want []string
		err  error
	}{
		{[]string{"show", "--scope", "user:ada"}, []string{"Memory of user ada (update 1,", "- Ada likes tea"}, nil},
		{[]string{"show"}, []string{"No memory for agent default"}, nil},
		{[]string{"history", "--scope", "user:ada", "-n", "1"}, []string{"trains"}, nil},
		{[]string{"search", "--scope", "user:ada", "tea"}, []string{"green tea"}, nil},
		{[]string{"search", "--scope", "agent", "tea"}, []string{"No history entries"}, nil},
		{[]string{"link", "telegram:123", "ada"}, []string{"telegram:123 is now ada"}, nil},
		{[]string{"links"}, []string{"telegram:123 → ada"}, nil},
		{[]string{"unlink", "telegram:123"}, []string{"no longer linked"}, nil},
		{[]string{"revisions"}, []string{"No revisions", "memory history"}, nil},
		{[]string{"show", "--scope", "team:x"}, nil, memory.ErrBadScope},
		{[]string{"frobnicate"}, []string{"Usage"}, errMemoryUsage},
		{nil, []string{"Usage"}, errMemoryUsage},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		err := runMemory(ctx, b, tt.args, &out)
		if tt.err != nil && !errors.Is(err, tt.err) || tt.err == nil && err != nil {
			t.Errorf("%v: err %v, want %v", tt.args, err, tt.err)
		}
		for _, w := range tt.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: output lacks %q:\n%s", tt.args, w, out.String())
			}
		}
	}
	if strings.Contains(func() string {
		var o bytes.Buffer
		_ = runMemory(ctx, b, []string{"history", "--scope", "user:ada", "-n", "1"}, &o)
		return o.String()
	}(), "green") {
		t.Error("history -n 1 shows more than the newest entry")
	}
}
