package subject_test

import (
	"testing"

	"github.com/nanofleet/nanofleet/pkg/subject"
)

// built is a subject a Space built and the one expected.
type built struct{ got, want string }

// wantSubjects checks every subject built against the one expected.
func wantSubjects(t *testing.T, subjects []built) {
	t.Helper()
	for _, s := range subjects {
		if s.got != s.want {
			t.Errorf("got %q, want %q", s.got, s.want)
		}
	}
}

func TestScheduleSubjects(t *testing.T) {
	sp := subject.MustSpace("nf")
	wantSubjects(t, []built{
		{sp.ScheduleAll(), "nf.sched.>"},
		{sp.ScheduleJob("telegram:42", "daily"), "nf.sched.job." + subject.Token("telegram:42") + ".daily"},
		{sp.ScheduleJobs(""), "nf.sched.job.*.*"},
		{sp.ScheduleJobs("telegram:42"), "nf.sched.job." + subject.Token("telegram:42") + ".*"},
		{sp.ScheduleJobsNamed("daily"), "nf.sched.job.*.daily"},
		{sp.ScheduleFire("telegram:42", "daily"), "nf.sched.fire." + subject.Token("telegram:42") + ".daily"},
		{sp.ScheduleFireAll(), "nf.sched.fire.>"},
	})
}

func TestWhatsAppSend(t *testing.T) {
	sp := subject.MustSpace("nf")
	tests := []struct{ account, want string }{
		{"default", "nf.whatsapp.send.default"},
		{"work-2", "nf.whatsapp.send.work-2"},
		{"a.b", "nf.whatsapp.send.a=2Eb"}, // one token, whatever the account
	}
	for _, tt := range tests {
		if got := sp.WhatsAppSend(tt.account); got != tt.want {
			t.Errorf("WhatsAppSend(%q) = %q, want %q", tt.account, got, tt.want)
		}
	}
}

func TestMemorySubjects(t *testing.T) {
	sp := subject.MustSpace("nf")
	session := subject.Token("telegram:42")
	wantSubjects(t, []built{
		{sp.MemoryLog("user.default.ada", "telegram:42"), "nf.memory.log.user.default.ada." + session},
		{sp.MemoryLogScope("user.default.ada"), "nf.memory.log.user.default.ada.*"},
		{sp.MemoryLogSession("telegram:42"), "nf.memory.log.*.*.*." + session},
		{sp.MemoryLogAgent("default"), "nf.memory.log.*.default.>"},
		{sp.MemoryLogAll(), "nf.memory.log.>"},
		{sp.MemoryRevision("agent.default.default"), "nf.memory.rev.agent.default.default"},
		{sp.MemoryRevisionAll(), "nf.memory.rev.>"},
		{sp.MemoryJobSchedule("dream", "a.b"), "nf.memory.job.sched.dream.a=2Eb"},
		{sp.MemoryJobFire("dream", "default"), "nf.memory.job.fire.dream.default"},
		{sp.MemoryJobAll(), "nf.memory.job.>"},
		{sp.MemoryJobSchedules(), "nf.memory.job.sched.>"},
	})
}

func TestToolAndKVSubjects(t *testing.T) {
	sp := subject.MustSpace("nf")
	wantSubjects(t, []built{
		{sp.ToolGroup(), "nf.tools"},
		{sp.ToolCatalog(), "nf.tools.catalog"},
		{sp.ToolCall("web.fetch"), "nf.tools.call.web=2Efetch"},
		{subject.KVKey(sp.Bucket("leases"), "worker.1"), "$KV.NF_leases.worker.1"},
	})
}
