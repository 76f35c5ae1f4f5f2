package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/memory"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

func TestMemory(t *testing.T) {
	ctx := t.Context()
	srv := bustest.StartServer(t)
	b := srv.Connect(t, "", memory.Assets)
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
		{[]string{"history", "--scope", "user:ada", "-n", "1"}, []string{"trains", "#2 tg:2 (history seq 1-2)"}, nil},
		{[]string{"--scope", "user:ada", "history"}, []string{"#1 tg:1 (history seq 1-2)", "green tea", "trains"}, nil},
		{[]string{"search", "--scope", "user:ada", "tea"}, []string{"green tea"}, nil},
		{[]string{"search", "tea", "--scope", "user:ada"}, []string{"green tea"}, nil},
		{[]string{"search", "--scope", "agent", "tea"}, []string{"No history entries"}, nil},
		{[]string{"link", "telegram:123", "ada"}, []string{"telegram:123 is now ada"}, nil},
		{[]string{"links"}, []string{"telegram:123 → ada"}, nil},
		{[]string{"unlink", "telegram:123"}, []string{"no longer linked"}, nil},
		{[]string{"revisions"}, []string{"No revisions", "memory history"}, nil},
		{[]string{"show", "--scope", "team:x"}, nil, memory.ErrBadScope},
		{[]string{"restore", "abc"}, nil, errUsage},
		{[]string{"link", "telegram", "ada"}, nil, errUsage},
	}
	for _, tt := range tests {
		env, out, _ := testEnv(t, nil)
		err := dispatch(ctx, env, append(append([]string{"memory"}, tt.args...), "--nats", srv.ClientURL()))
		if tt.err != nil && !errors.Is(err, tt.err) || tt.err == nil && err != nil {
			t.Errorf("%v: err %v, want %v", tt.args, err, tt.err)
		}
		for _, w := range tt.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: output lacks %q:\n%s", tt.args, w, out.String())
			}
		}
	}
	env, out, _ := testEnv(t, nil)
	if err := dispatch(ctx, env, []string{"memory", "history", "--scope", "user:ada", "-n", "1", "--nats", srv.ClientURL()}); err != nil || strings.Contains(out.String(), "green") {
		t.Errorf("history -n 1 shows more than the newest entry: %v\n%s", err, out.String())
	}
}
