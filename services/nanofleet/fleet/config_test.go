package fleet_test

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/services/agent-worker/agentworker"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

// loadAll reads data as every service does at start-up: the one loader
// (shared sections), then each owner decoding and validating its own
// section, without starting anything.
func loadAll(data string) error {
	env := map[string]string{"OPENAI_API_KEY": "k"}
	file := config.Defaults()
	if err := config.Parse(file, []byte(data), func(k string) string { return env[k] }); err != nil {
		return err
	}
	if err := svc.BusConfig(file, "test").Validate(); err != nil {
		return err
	}
	if err := svc.Layout(file).Validate(); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, _, err := agentworker.Model(file, func(k string) string { return env[k] }, 0, log); err != nil {
		return err
	}
	// No workspace: tools.workspace.root is the file's, as the tool
	// runner's binary reads it.
	return fleet.CheckSections(file, func(k string) string { return env[k] }, "", true)
}

// TestEveryBadKeyIsNamed feeds a bad value for each validated key of every
// service and checks that start-up fails with a config.Error matching
// config.ErrInvalid that names the key's whole path.
func TestEveryBadKeyIsNamed(t *testing.T) {
	if err := loadAll(`{}`); err != nil {
		t.Fatalf("the defaults do not load: %v", err)
	}
	tests := []struct {
		json string
		key  string
	}{
		// The shared sections (pkg/config).
		{`{"nats":{"replicas":7}}`, "nats.replicas"},
		{`{"nats":{"leaseTtlSeconds":0}}`, "nats.leaseTtlSeconds"},
		{`{"nats":{"duplicateWindowSeconds":0}}`, "nats.duplicateWindowSeconds"},
		{`{"nats":{"replayWindowSeconds":10}}`, "nats.replayWindowSeconds"},
		{`{"nats":{"duplicateWindowSeconds":30}}`, "nats.duplicateWindowSeconds"},
		{`{"nats":{"leaseTtlSeconds":5,"replayWindowSeconds":30}}`, "nats.replayWindowSeconds"},
		{`{"nats":{"port":70000}}`, "nats.port"},
		{`{"nats":{"prefix":"a.b"}}`, "nats.prefix"},
		{`{"nats":{"replica":1}}`, "nats.replica"},
		{`{"nats":{"url":"${NOT_SET_ANYWHERE}"}}`, "nats.url"},
		{`{"nats":{"tls":{"certFile":"/c.pem"}}}`, "nats.tls.keyFile"},
		{`{"nats":{"tls":{"keyFile":"/k.pem"}}}`, "nats.tls.certFile"},
		{`{"agents":{"defaults":{"model":""}}}`, "agents.defaults.model"},
		{`{"agents":{"defaults":{"maxTokens":0}}}`, "agents.defaults.maxTokens"},
		{`{"agents":{"defaults":{"temperature":3}}}`, "agents.defaults.temperature"},
		{`{"agents":{"defaults":{"maxToolIterations":0}}}`, "agents.defaults.maxToolIterations"},
		{`{"agents":{"defaults":{"contextWindowTokens":10}}}`, "agents.defaults.contextWindowTokens"},
		{`{"providers":{"openai":{"maxConcurrent":-2}}}`, "providers.openai.maxConcurrent"},
		{`{"observability":{"listen":"::::"}}`, "observability.listen"},

		// The agent worker: worker, agents.defaults as the worker reads
		// them, schedule, and the model provider.
		{`{"agents":{"defaults":{"timezone":"Mars/Base"}}}`, "agents.defaults.timezone"},
		{`{"agents":{"defaults":{"contextWindowTokens":2048}}}`, "agents.defaults.contextWindowTokens"},
		{`{"worker":{"turnsPerWorker":0}}`, "worker.turnsPerWorker"},
		{`{"worker":{"turnsPerWorker":"many"}}`, "worker.turnsPerWorker"},
		{`{"worker":{"fleetTurnLimit":1}}`, "worker.fleetTurnLimit"},
		{`{"worker":{"ackWaitSeconds":0}}`, "worker.ackWaitSeconds"},
		{`{"worker":{"ackWaitSeconds":"1m"}}`, "worker.ackWaitSeconds"},
		{`{"worker":{"maxAttempts":0}}`, "worker.maxAttempts"},
		{`{"worker":{"historyCacheMB":-1}}`, "worker.historyCacheMB"},
		{`{"worker":{"dailyTokenBudget":-1}}`, "worker.dailyTokenBudget"},
		{`{"worker":{"messageAllowTo":["*","telegram"]}}`, "worker.messageAllowTo[1]"},
		{`{"worker":{"slots":4}}`, "worker.slots"},
		{`{"worker":"fast"}`, "worker"},
		{`{"worker":{"LeaseTTL":4}}`, "worker.LeaseTTL"},
		{`{"schedule":{"heartbeat":{"intervalS":-5}}}`, "schedule.heartbeat.intervalS"},
		{`{"schedule":{"heartbeat":{"intervalS":"30m"}}}`, "schedule.heartbeat.intervalS"},
		{`{"schedule":{"heartbeat":{"keepTurns":-1}}}`, "schedule.heartbeat.keepTurns"},
		{`{"schedule":{"heartbeat":{"notifyChat":"1"}}}`, "schedule.heartbeat.notifyChannel"},
		{`{"schedule":{"heartbeat":{"notifyChannel":"telegram"}}}`, "schedule.heartbeat.notifyChat"},
		{`{"schedule":{"subagents":{"maxPerSession":-1}}}`, "schedule.subagents.maxPerSession"},
		{`{"schedule":{"subagents":{"waitTimeout":5}}}`, "schedule.subagents.waitTimeout"},
		{`{"agents":{"defaults":{"provider":"nosuch"}}}`, "agents.defaults.provider"},
		{`{"agents":{"defaults":{"fallbackModels":[" "]}}}`, "agents.defaults.fallbackModels"},
		{`{"providers":{"openai":{"apiBase":"ftp://x"}}}`, "providers.openai.apiBase"},
		{`{"providers":{"openai":{"extraHeaders":{"bad header":"x"}}}}`, "providers.openai.extraHeaders"},
		{`{"providers":{"opneai":{"apiKey":"x"}}}`, "providers.opneai"},
		{`{"providers":{"zhipu":{"apiKey":"abc"}}}`, "providers.zhipu"},

		// The tool runner.
		{`{"tools":{"workspace":{"root":""}}}`, "tools.workspace.root"},
		{`{"tools":{"workspace":{"quotaBytes":-1}}}`, "tools.workspace.quotaBytes"},
		{`{"tools":{"workspace":{"quotaFiles":5}}}`, "tools.workspace.quotaFiles"},
		{`{"tools":{"exec":{"timeout":0}}}`, "tools.exec.timeout"},
		{`{"tools":{"exec":{"maxTimeout":0}}}`, "tools.exec.maxTimeout"},
		{`{"tools":{"exec":{"maxOutputChars":10}}}`, "tools.exec.maxOutputChars"},
		{`{"tools":{"exec":{"denyPatterns":["("]}}}`, "tools.exec.denyPatterns"},
		{`{"tools":{"exec":{"sandbox":"docker"}}}`, "tools.exec.sandbox"},
		{`{"tools":{"exec":{"env":["1X"]}}}`, "tools.exec.env"},
		{`{"tools":{"exec":{"limits":{"processes":-1}}}}`, "tools.exec.limits.processes"},
		{`{"tools":{"exec":{"limits":{"openFiles":3}}}}`, "tools.exec.limits.openFiles"},
		{`{"tools":{"exec":{"hostUid":0}}}`, "tools.exec.hostUid"},
		{`{"tools":{"exec":{"hostGid":0}}}`, "tools.exec.hostGid"},
		// Cut to 32 bits by the kernel: root.
		{`{"tools":{"exec":{"hostUid":4294967296}}}`, "tools.exec.hostUid"},
		{`{"tools":{"exec":{"hostGid":4294967296}}}`, "tools.exec.hostGid"},
		// (uid_t)-1, no id: every exec fails with EINVAL.
		{`{"tools":{"exec":{"hostUid":4294967295}}}`, "tools.exec.hostUid"},
		{`{"tools":{"exec":{"tmpSizeMb":-1}}}`, "tools.exec.tmpSizeMb"},
		// Shifted to bytes, 2^44 MB wraps to 0 (unlimited) and 2^43 MB
		// to a negative size.
		{`{"tools":{"exec":{"limits":{"addressSpaceMb":17592186044416}}}}`, "tools.exec.limits.addressSpaceMb"},
		{`{"tools":{"exec":{"limits":{"fileSizeMb":8796093022208}}}}`, "tools.exec.limits.fileSizeMb"},
		{`{"tools":{"exec":{"tmpSizeMb":8796093022208}}}`, "tools.exec.tmpSizeMb"},
		{`{"tools":{"web":{"search":{"provider":"bing"}}}}`, "tools.web.search.provider"},
		{`{"tools":{"web":{"search":{"provider":"brave"}}}}`, "tools.web.search.apiKey"},
		{`{"tools":{"web":{"search":{"provider":"searxng"}}}}`, "tools.web.search.baseUrl"},
		{`{"tools":{"web":{"search":{"baseUrl":"ftp://x"}}}}`, "tools.web.search.baseUrl"},
		{`{"tools":{"web":{"search":{"maxResults":11}}}}`, "tools.web.search.maxResults"},
		{`{"tools":{"web":{"search":{"timeout":0}}}}`, "tools.web.search.timeout"},
		{`{"tools":{"web":{"fetch":{"allowCIDRs":["10.0.0.1"]}}}}`, "tools.web.fetch.allowCIDRs"},
		{`{"tools":{"web":{"fetch":{"maxChars":10}}}}`, "tools.web.fetch.maxChars"},
		{`{"tools":{"web":{"fetch":{"maxBytes":10}}}}`, "tools.web.fetch.maxBytes"},
		{`{"tools":{"web":{"fetch":{"timeout":0}}}}`, "tools.web.fetch.timeout"},
		{`{"tools":{"runner":{"heartbeatMs":5}}}`, "tools.runner.heartbeatMs"},
		{`{"tools":{"runner":{"maxConcurrent":0}}}`, "tools.runner.maxConcurrent"},
		{`{"tools":{"runner":{"callTimeout":5}}}`, "tools.runner.callTimeout"},
		{`{"tools":{"runner":{"oversizeChars":10}}}`, "tools.runner.oversizeChars"},
		{`{"tools":{"runner":{"previewChars":10}}}`, "tools.runner.previewChars"},
		{`{"tools":{"mcpServers":{"x":{"url":"ftp://x"}}}}`, "tools.mcpServers.x.url"},
		{`{"tools":{"mcpServers":{"x":{"command":"x","toolTimeout":-1}}}}`, "tools.mcpServers.x.toolTimeout"},
		{`{"tools":{"mcpServers":{"a__b":{"command":"x"}}}}`, "tools.mcpServers.a__b"},

		// The channel gateway (each adapter's own tests cover the rest of
		// its keys).
		{`{"channels":{"telegram":{"enabled":true}}}`, "channels.telegram.token"},
		{`{"channels":{"discord":{"enabled":true}}}`, "channels.discord.token"},
		{`{"channels":{"slack":{"enabled":true}}}`, "channels.slack.botToken"},
		{`{"channels":{"feishu":{"enabled":true}}}`, "channels.feishu.appId"},
		{`{"channels":{"dingtalk":{"enabled":true}}}`, "channels.dingtalk.clientId"},
		{`{"channels":{"api":{"token":"short"}}}`, "channels.api.token"},
		{`{"channels":{"web":{"maxConnections":-1}}}`, "channels.web.maxConnections"},
		{`{"channels":{"email":{"enabled":true}}}`, "channels.email.enabled"},
		{`{"channels":{"telegram":{"tokn":"x"}}}`, "channels.telegram.tokn"},

		// The memory consolidator and the worker's memory.
		{`{"memory":{"scope":"x"}}`, "memory.scope"},
		{`{"memory":{"groupScope":"user"}}`, "memory.groupScope"},
		{`{"memory":{"consolidateShare":2}}`, "memory.consolidateShare"},
		{`{"memory":{"searchScan":-1}}`, "memory.searchScan"},
		{`{"memory":{"consolidator":{"slots":-1}}}`, "memory.consolidator.slots"},
		{`{"memory":{"consolidator":{"maxDeliveries":-1}}}`, "memory.consolidator.maxDeliveries"},
		{`{"memory":{"consolidator":{"maxRequestBytes":10}}}`, "memory.consolidator.maxRequestBytes"},
		{`{"memory":{"consolidator":{"chunkTokens":10}}}`, "memory.consolidator.chunkTokens"},
		{`{"memory":{"consolidator":{"ackWaitSeconds":0}}}`, "memory.consolidator.ackWaitSeconds"},
		{`{"memory":{"consolidator":{"ackWaitSeconds":"1m"}}}`, "memory.consolidator.ackWaitSeconds"},
		{`{"memory":{"consolidator":{"slot":1}}}`, "memory.consolidator.slot"},
		{`{"memory":{"dream":{"every":"soon"}}}`, "memory.dream.every"},
		{`{"memory":{"dream":{"every":"1ms"}}}`, "memory.dream.every"},
		{`{"memory":{"dream":{"timeZone":"UTC"}}}`, "memory.dream.timeZone"},
		{`{"memory":{"dream":{"cron":"@daily","timeZone":"Mars/Base"}}}`, "memory.dream.timeZone"},
		{`{"memory":{"dream":{"maxEntries":-1}}}`, "memory.dream.maxEntries"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			err := loadAll(tt.json)
			var ce *config.Error
			switch {
			case err == nil:
				t.Fatalf("%s loaded", tt.json)
			case !errors.Is(err, config.ErrInvalid) || !errors.As(err, &ce):
				t.Fatalf("%s: %v is not a config.Error", tt.json, err)
			case ce.Key != tt.key || !strings.Contains(err.Error(), tt.key+": "):
				t.Fatalf("%s: %v names %q, want %s", tt.json, err, ce.Key, tt.key)
			}
		})
	}
}

// TestStartNamesEveryBadSection: a file with bad keys in several parts'
// sections (as a config pasted from nanobot has) is refused before
// anything starts, naming every one of them.
func TestStartNamesEveryBadSection(t *testing.T) {
	file := config.Defaults()
	data := `{
		"providers": {"opneai": {"apiKey": "x"}},
		"tools": {"restrictToWorkspace": false},
		"worker": {"turnsPerWorkr": 4},
		"memory": {"consolidator": {"slots": -1}},
		"channels": {"telegram": {"enabled": true, "tokn": "x"}}
	}`
	if err := config.Parse(file, []byte(data), func(string) string { return "" }); err != nil {
		t.Fatalf("the shared sections are fine: %v", err)
	}
	dataDir := t.TempDir()
	_, err := fleet.Start(t.Context(), fleet.Options{
		File: file, Getenv: func(string) string { return "" }, DataDir: dataDir, Workspace: t.TempDir(), Gateway: true,
	})
	if !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("Start: %v, want an invalid config error", err)
	}
	for _, key := range []string{"providers.opneai", "tools.restrictToWorkspace", "worker.turnsPerWorkr", "memory.consolidator.slots", "channels.telegram.tokn"} {
		if !strings.Contains(err.Error(), key+":") {
			t.Errorf("error does not name %s:\n%v", key, err)
		}
	}
	if entries, err := os.ReadDir(dataDir); err != nil || len(entries) != 0 {
		t.Errorf("the data directory holds %d entries (%v); nothing should have started", len(entries), err)
	}
}
