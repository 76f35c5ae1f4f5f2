package heartbeat_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/services/agent-worker/heartbeat"
)

const template = `# Heartbeat Tasks

This file is checked every 30 minutes by your nanobot agent.
Add tasks below that you want the agent to work on periodically.

## Active Tasks

<!-- Add your periodic tasks below this line -->

- [ ]

## Completed

<!-- Move completed tasks here or delete them -->
- [x] water the plants
`

func TestActiveTasks(t *testing.T) {
	tests := []struct {
		name, md, want string
	}{
		{"empty file", "", ""},
		{"nanobot template", template, ""},
		{"one task", "## Active Tasks\n<!-- comment -->\n- check the build status of main\n\n## Completed\n- old\n", "- check the build status of main"},
		{"sub-headings stay in section", "## Active Tasks\n### Daily\n- a\n- [ ] b\n## Done\n- c", "- a\n- [ ] b"},
		{"multi-line comment", "## Active Tasks\n<!--\n- not a task\n-->\n- real task", "- real task"},
		{"inline comment", "## Active Tasks\n- task <!-- note -->", "- task"},
		{"no section: whole file", "# Notes\n- remind me to stretch\n", "- remind me to stretch"},
		{"completed only", "## Active Tasks\n- [x] done\n* [X] done too", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := heartbeat.ActiveTasks(tt.md); got != tt.want {
				t.Errorf("ActiveTasks = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestIsOK(t *testing.T) {
	tests := []struct {
		reply string
		want  bool
	}{
		{"HEARTBEAT_OK", true},
		{"**HEARTBEAT_OK**", true},
		{"heartbeat ok.", true},
		{"`HEARTBEAT_OK`", true},
		{"The build on main is red since 09:12.", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := heartbeat.IsOK(tt.reply); got != tt.want {
			t.Errorf("IsOK(%q) = %v", tt.reply, got)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	ok := heartbeat.DefaultConfig()
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(*heartbeat.Config)
	}{
		{"no agent", func(c *heartbeat.Config) { c.Agent = "" }},
		{"sub-second", func(c *heartbeat.Config) { c.Every = config.Seconds(500 * time.Millisecond) }},
		{"fractional", func(c *heartbeat.Config) { c.Every = config.Seconds(1500 * time.Millisecond) }},
		{"keep none", func(c *heartbeat.Config) { c.KeepTurns = 0 }},
		{"chat without channel", func(c *heartbeat.Config) { c.NotifyChat = "1" }},
	}
	for _, tt := range tests {
		c := heartbeat.DefaultConfig()
		tt.change(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", tt.name)
		}
	}
	// Past a Duration's range the file's seconds are held at the most
	// whole seconds one holds: an interval of 292 years, not a refusal
	// printing the bound in nanoseconds.
	long := heartbeat.DefaultConfig()
	if err := json.Unmarshal([]byte(`{"intervalS": 36028797018964028}`), &long); err != nil {
		t.Fatal(err)
	}
	if err := long.Validate(); err != nil {
		t.Errorf("interval past a Duration: %v", err)
	}
	off := heartbeat.DefaultConfig()
	off.Enabled, off.Every = false, 0
	if err := off.Validate(); err != nil {
		t.Errorf("disabled without interval: %v", err)
	}
}
