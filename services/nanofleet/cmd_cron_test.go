package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/schedule"
)

// TestCron runs `nanofleet cron` against a real JetStream: the operator
// sees every session's jobs with their next fire time and removes any of
// them. The steps run in order; each sees what the ones before left.
func TestCron(t *testing.T) {
	ctx := t.Context()
	srv := bustest.StartServer(t)
	b := srv.Connect(t, "", schedule.Assets)
	s, err := schedule.Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []schedule.Job{
		{ID: "stretch", SessionKey: "telegram:42", Channel: "telegram", ChatID: "42", Message: "stretch", Spec: schedule.Spec{Every: time.Hour}},
		{ID: "standup", SessionKey: "telegram:42", Channel: "telegram", ChatID: "42", Message: "standup", Spec: schedule.Spec{Cron: "0 9 * * 1-5", TZ: "Europe/Berlin"}},
		{ID: "other", SessionKey: "slack:C1", Channel: "slack", ChatID: "C1", Message: "other\n  chat's   job", Spec: schedule.Spec{Every: time.Minute}},
	} {
		if _, err := s.Add(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	nats := srv.ClientURL()
	tests := []struct {
		name  string
		args  []string
		lines int // of the output; 0: not checked
		want  []string
		not   []string
		err   error
	}{
		{"list every session", []string{"list"}, 4, []string{"NEXT", "slack:C1", "telegram:42", "cron 0 9 * * 1-5 (Europe/Berlin)", "every 1h0m0s", "other chat's job"}, nil, nil},
		{"list one session", []string{"list", "--session", "slack:C1"}, 2, []string{"slack:C1"}, []string{"telegram:42"}, nil},
		{"session before the subcommand", []string{"--session", "slack:C1", "list"}, 2, []string{"slack:C1"}, []string{"telegram:42"}, nil},
		{"remove", []string{"remove", "standup"}, 1, []string{"removed job standup of telegram:42 (cron 0 9 * * 1-5 (Europe/Berlin))"}, nil, nil},
		{"remove in another session", []string{"remove", "--session", "slack:C1", "stretch"}, 0, nil, nil, schedule.ErrNotFound},
		{"remove unknown", []string{"remove", "nope"}, 0, nil, nil, schedule.ErrNotFound},
		{"list after remove", []string{"list"}, 3, []string{"stretch", "other"}, []string{"standup"}, nil},
		{"remove the rest", []string{"remove", "--session", "slack:C1", "other"}, 1, []string{"removed job other of slack:C1"}, nil, nil},
		{"remove the last", []string{"remove", "stretch"}, 1, []string{"removed job stretch"}, nil, nil},
		{"list none", []string{"list"}, 1, []string{"no scheduled jobs"}, nil, nil},
	}
	for _, tt := range tests {
		env, out, _ := testEnv(t, nil)
		err := dispatch(ctx, env, append(append([]string{"cron"}, tt.args...), "--nats", nats))
		if tt.err != nil && !errors.Is(err, tt.err) || tt.err == nil && err != nil {
			t.Fatalf("%s: err %v, want %v", tt.name, err, tt.err)
		}
		got := out.String()
		if tt.lines != 0 && strings.Count(got, "\n") != tt.lines {
			t.Errorf("%s: %d lines, want %d:\n%s", tt.name, strings.Count(got, "\n"), tt.lines, got)
		}
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: output lacks %q:\n%s", tt.name, w, got)
			}
		}
		for _, w := range tt.not {
			if strings.Contains(got, w) {
				t.Errorf("%s: output has %q:\n%s", tt.name, w, got)
			}
		}
	}
}
