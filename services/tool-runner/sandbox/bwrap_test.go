package sandbox_test

import (
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/services/tool-runner/sandbox"
)

func TestPrlimitArgs(t *testing.T) {
	all := sandbox.Limits{AddressSpaceMB: 2, CPUSeconds: 3, FileSizeMB: 4, OpenFiles: 5, Processes: 6}
	cases := []struct {
		name  string
		lim   sandbox.Limits
		fsize int64
		want  string
	}{
		{"every limit", all, 4 << 20, "/p --as=2097152 --cpu=3 --fsize=4194304 --nofile=5 --nproc=6 --core=0 --"},
		{"fsize replaces FileSizeMB", all, 100, "/p --as=2097152 --cpu=3 --fsize=100 --nofile=5 --nproc=6 --core=0 --"},
		{"negative fsize: no file written", all, -1, "/p --as=2097152 --cpu=3 --fsize=0 --nofile=5 --nproc=6 --core=0 --"},
		{"zero leaves a limit unset", sandbox.Limits{OpenFiles: 5}, 0, "/p --nofile=5 --core=0 --"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := strings.Join(c.lim.PrlimitArgs("/p", c.fsize), " "); got != c.want {
				t.Errorf("PrlimitArgs = %q, want %q", got, c.want)
			}
		})
	}
}

func TestSystemArgs(t *testing.T) {
	cases := []struct {
		name        string
		args        []string
		has, hasNot []string // runs that must, and must not, appear
	}{
		{
			"no network", sandbox.BwrapFeatures{}.SystemArgs(false, 3, 0),
			[]string{"--unshare-net", "--ro-bind-data 3 /etc/passwd --ro-bind-data 4 /etc/group", "--tmpfs /tmp"},
			[]string{"--disable-userns", "--unshare-cgroup-try", "/etc/resolv.conf", "--size"},
		},
		{
			"network, features, bounded /tmp", sandbox.BwrapFeatures{DisableUserns: true, UnshareCgroupTry: true}.SystemArgs(true, 4, 32),
			[]string{"--disable-userns", "--unshare-cgroup-try", "--ro-bind-try /etc/resolv.conf /etc/resolv.conf",
				"--ro-bind-data 4 /etc/passwd --ro-bind-data 5 /etc/group", "--size 33554432 --tmpfs /tmp"},
			[]string{"--unshare-net"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			line := " " + strings.Join(c.args, " ") + " "
			if !strings.HasPrefix(line, " --unshare-user --uid 65534 --gid 65534 ") {
				t.Errorf("does not start in the sandbox user: %s", line)
			}
			if !strings.HasSuffix(line, " --tmpfs /tmp ") {
				t.Errorf("does not end with /tmp: %s", line)
			}
			for _, w := range c.has {
				if !strings.Contains(line, " "+w+" ") {
					t.Errorf("lacks %q: %s", w, line)
				}
			}
			for _, w := range c.hasNot {
				if strings.Contains(line, " "+w+" ") {
					t.Errorf("has %q: %s", w, line)
				}
			}
		})
	}
}
