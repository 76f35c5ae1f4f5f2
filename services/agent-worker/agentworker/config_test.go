package agentworker_test

import (
	"testing"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/config/configtest"
	"github.com/nanofleet/nanofleet/services/agent-worker/agentworker"
)

// TestEveryWorkerProblemAtOnce: the worker's and the schedule's sections
// name every unknown key and bad value in one error, a line each (they
// named the first, and a typo hid the values).
func TestEveryWorkerProblemAtOnce(t *testing.T) {
	tests := []struct {
		name, json string
		check      func(*config.File) error
		want       []string
	}{
		{"worker", `{
			"worker": {"turnsPerWorkr": 4, "ackWaitSeconds": 0, "maxAttempts": 0, "messageAllowTo": ["x", "*", "y"]},
			"agents": {"defaults": {"timezone": "Mars/Base"}}
		}`, func(f *config.File) error {
			_, _, err := agentworker.ConfigFrom(f, "w", "/ws")
			return err
		}, []string{
			"worker.turnsPerWorkr: unknown key",
			"agents.defaults.timezone: unknown time zone Mars/Base",
			"worker.ackWaitSeconds: must be at least 1",
			"worker.maxAttempts: must be at least 1",
			`worker.messageAllowTo[0]: want "channel:chat", "channel:*" or "*", got "x"`,
			`worker.messageAllowTo[2]: want "channel:chat", "channel:*" or "*", got "y"`,
		}},
		{"schedule", `{"schedule": {"heartbeat": {"intervalS": -5, "keepTurns": 0, "notifyChat": "1"}, "subagents": {"maxPerSession": 0}}}`,
			func(f *config.File) error {
				_, err := agentworker.Schedule(f)
				return err
			}, []string{
				"schedule.heartbeat.intervalS: -5s, want whole seconds",
				"schedule.heartbeat.keepTurns: 0, want at least 1",
				"schedule.heartbeat.notifyChannel: must be set with notifyChat",
				"schedule.subagents.maxPerSession: 0, want at least 1",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := config.Defaults()
			if err := config.Parse(f, []byte(tt.json), func(string) string { return "" }); err != nil {
				t.Fatal(err)
			}
			err := tt.check(f)
			configtest.WantProblems(t, err, tt.want...)
		})
	}
}
