package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/schedule"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// TestCron runs `nanofleet cron` against a real JetStream: the operator
// sees every session's jobs with their next fire time and removes any of
// them but the heartbeat, which the config makes. The steps run in order;
// each sees what the ones before left.
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
		{ID: "heartbeat", SessionKey: "heartbeat:default", Channel: "heartbeat", ChatID: "default", Message: "check", Spec: schedule.Spec{Every: 30 * time.Minute},
			Kind: nanofleetv1.InboundKind_INBOUND_KIND_HEARTBEAT},
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
		{"list every session", []string{"list"}, 6, []string{"NEXT", "slack:C1", "telegram:42", "cron 0 9 * * 1-5 (Europe/Berlin)", "every 1h0m0s", "other chat's job",
			"(the heartbeat comes from the config, schedule.heartbeat: it can be seen but not removed here"}, nil, nil},
		{"list one session", []string{"list", "--session", "slack:C1"}, 2, []string{"slack:C1"}, []string{"telegram:42", "heartbeat"}, nil},
		{"session before the subcommand", []string{"--session", "slack:C1", "list"}, 2, []string{"slack:C1"}, []string{"telegram:42"}, nil},
		{"remove", []string{"remove", "standup"}, 1, []string{"removed job standup of telegram:42 (cron 0 9 * * 1-5 (Europe/Berlin))"}, nil, nil},
		{"remove in another session", []string{"remove", "--session", "slack:C1", "stretch"}, 0, nil, nil, schedule.ErrNotFound},
		{"remove unknown", []string{"remove", "nope"}, 0, nil, nil, schedule.ErrNotFound},
		{"remove the heartbeat", []string{"remove", "heartbeat"}, 0, nil, nil, errConfigJob},
		{"remove the heartbeat in its session", []string{"remove", "heartbeat", "--session", "heartbeat:default"}, 0, nil, nil, errConfigJob},
		{"list after remove", []string{"list"}, 5, []string{"stretch", "other", "heartbeat"}, []string{"standup"}, nil},
		{"remove the rest", []string{"remove", "--session", "slack:C1", "other"}, 1, []string{"removed job other of slack:C1"}, nil, nil},
		{"remove the last", []string{"remove", "stretch"}, 1, []string{"removed job stretch"}, nil, nil},
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
	if _, err := s.Get(ctx, "heartbeat:default", "heartbeat"); err != nil {
		t.Errorf("the heartbeat job is gone: %v", err)
	}
	env, _, _ := testEnv(t, nil)
	err = dispatch(ctx, env, []string{"cron", "remove", "heartbeat", "--nats", nats})
	for _, want := range []string{"set schedule.heartbeat.enabled to false in " + env.home() + "/config.json", "can be seen but not removed"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("cron remove heartbeat: %v, want it to say %q", err, want)
		}
	}
}
