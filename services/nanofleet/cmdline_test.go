package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/memory"
	"github.com/nanofleet/nanofleet/pkg/schedule"
	"github.com/nanofleet/nanofleet/services/channel-gateway/access"
	"github.com/nanofleet/nanofleet/services/channel-gateway/status"
)

func TestParseInterspersed(t *testing.T) {
	tests := []struct {
		name string
		args []string
		rest []string
		n    int
		v    bool
	}{
		{"flags first", []string{"-n", "3", "-v", "a", "b"}, []string{"a", "b"}, 3, true},
		{"flags last", []string{"a", "b", "-n", "3", "-v"}, []string{"a", "b"}, 3, true},
		{"flags among", []string{"a", "-n=3", "b", "--v"}, []string{"a", "b"}, 3, true},
		{"-- ends the flags", []string{"a", "--", "-n", "3"}, []string{"a", "-n", "3"}, 0, false},
		{"none", nil, nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			n, v := fs.Int("n", 0, ""), fs.Bool("v", false, "")
			rest, err := parseInterspersed(fs, tt.args)
			if err != nil || !slices.Equal(rest, tt.rest) || *n != tt.n || *v != tt.v {
				t.Errorf("rest %q n %d v %t err %v; want %q %d %t", rest, *n, *v, err, tt.rest, tt.n, tt.v)
			}
		})
	}
}

// flagsOf lists the flags a help text shows.
func flagsOf(help string) []string {
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^  -(\S+)`).FindAllStringSubmatch(help, -1) {
		names = append(names, m[1])
	}
	return names
}

// TestSubcommandHelp: every command with subcommands answers -h, --help
// and help on stdout with exit 0, listing its subcommands one a line and
// only the flags they take; without a subcommand it prints its usage
// once on stderr and exits 2, naming no internal package.
func TestSubcommandHelp(t *testing.T) {
	client := []string{"config", "data", "nats"}
	tests := []struct {
		command string
		subs    []string
		flags   []string // besides the client's
	}{
		{"memory", []string{"show", "history", "search", "revisions", "restore", "link", "unlink", "links"}, []string{"agent", "n", "scope"}},
		{"pairing", []string{"approve"}, nil},
		{"channels", []string{"status", "login"}, []string{"timeout"}},
		{"cron", []string{"list", "remove"}, []string{"session"}},
		{"profile", []string{"seed"}, []string{"workspace"}},
	}
	run := func(args ...string) (code int, stdout, stderr string) {
		env, out, _ := testEnv(t, nil)
		var errOut bytes.Buffer
		code = exitCode(dispatch(t.Context(), env, args), &errOut)
		return code, out.String(), errOut.String()
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			want := slices.Sorted(slices.Values(append(slices.Clone(client), tt.flags...)))
			for _, ask := range [][]string{{tt.command, "-h"}, {tt.command, "--help"}, {tt.command, "help"}, {"help", tt.command}} {
				code, out, errOut := run(ask...)
				if code != 0 || errOut != "" {
					t.Errorf("%q: exit %d, stderr %q; want 0 and nothing", ask, code, errOut)
				}
				for _, sub := range tt.subs {
					if !regexp.MustCompile(`(?m)^  ` + sub + ` +\S`).MatchString(out) {
						t.Errorf("%q does not list %s on a line:\n%s", ask, sub, out)
					}
				}
				if got := slices.Sorted(slices.Values(flagsOf(out))); !slices.Equal(got, want) {
					t.Errorf("%q shows flags %q, want %q:\n%s", ask, got, want, out)
				}
			}
			code, out, errOut := run(tt.command)
			if code != 2 || out != "" || strings.Count(errOut, "usage: nanofleet "+tt.command) != 1 ||
				strings.Contains(errOut, "memcli") || strings.HasPrefix(errOut, "nanofleet:") {
				t.Errorf("%s alone: exit %d, stdout %q, stderr %q; want 2 and the usage once on stderr", tt.command, code, out, errOut)
			}
			// A subcommand's help: its usage line and its flags only.
			sub := tt.subs[0]
			for _, ask := range [][]string{{tt.command, sub, "--help"}, {tt.command, sub, "-h"}, {tt.command, "help", sub}} {
				code, out, errOut := run(ask...)
				if code != 0 || errOut != "" || !strings.Contains(out, "usage: nanofleet ") {
					t.Errorf("%q: exit %d, stdout %q, stderr %q", ask, code, out, errOut)
				}
				for _, f := range flagsOf(out) {
					if !slices.Contains(want, f) {
						t.Errorf("%q shows -%s", ask, f)
					}
				}
			}
		})
	}
	code, out, _ := run("cron", "remove", "-h")
	if code != 0 || !strings.HasPrefix(out, "usage: nanofleet cron remove [--session KEY] JOB_ID [flags]\n") || !slices.Equal(flagsOf(out), []string{"config", "data", "nats", "session"}) {
		t.Errorf("cron remove -h: exit %d:\n%s", code, out)
	}
}

// TestFlagsBeforeOrAfterTheSubcommand: each command with subcommands takes
// its flags before or after the subcommand's name, and after its
// arguments, with the same result.
func TestFlagsBeforeOrAfterTheSubcommand(t *testing.T) {
	srv := bustest.StartServer(t)
	srv.Connect(t, "", schedule.Assets, status.Assets, access.Assets, memory.Assets)
	nats := srv.ClientURL()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "fleet.json")
	if err := os.WriteFile(cfg, []byte(`{"channels": {"telegram": {"enabled": true, "token": "1:x"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		forms [][]string
		want  string // in stdout; "" when it prints nothing
		err   error
	}{
		{"profile seed --workspace", [][]string{
			{"profile", "seed", "--workspace", ws, "--nats", nats},
			{"profile", "--workspace", ws, "--nats", nats, "seed"},
			{"profile", "--nats", nats, "seed", "--workspace", ws},
		}, "profile: 0 file(s) copied from " + ws, nil},
		{"channels status --config", [][]string{
			{"channels", "status", "--config", cfg, "--nats", nats},
			{"channels", "--config", cfg, "--nats", nats, "status"},
		}, "telegram  not running", nil},
		{"channels login whatsapp --timeout", [][]string{
			{"channels", "login", "whatsapp", "--timeout", "1ms", "--nats", nats},
			{"channels", "--timeout", "1ms", "login", "--nats", nats, "whatsapp"},
		}, "waiting for a gateway with channels.whatsapp enabled", errNotLinked},
		{"cron --session", [][]string{
			{"cron", "list", "--session", "cli:direct", "--nats", nats},
			{"cron", "--session", "cli:direct", "--nats", nats, "list"},
		}, "no scheduled jobs", nil},
		{"pairing approve", [][]string{
			{"pairing", "approve", "AB12", "--nats", nats},
			{"pairing", "--nats", nats, "approve", "AB12"},
		}, "", access.ErrUnknownCode},
		{"memory", [][]string{
			{"memory", "links", "--nats", nats},
			{"memory", "--nats", nats, "links"},
		}, "No identity links.", nil},
	}
	for _, tt := range tests {
		for _, args := range tt.forms {
			env, out, _ := testEnv(t, nil)
			err := dispatch(t.Context(), env, args)
			if tt.err == nil && err != nil || tt.err != nil && !errors.Is(err, tt.err) {
				t.Errorf("%q: %v, want %v", args, err, tt.err)
			}
			if tt.want == "" && out.Len() > 0 || !strings.Contains(out.String(), tt.want) {
				t.Errorf("%q printed %q, want %q", args, out.String(), tt.want)
			}
		}
	}
}
