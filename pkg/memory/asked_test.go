package memory

import (
	"testing"
	"time"
)

func TestAskedTable(t *testing.T) {
	const keep = 10 * time.Minute
	type step struct {
		after  time.Duration // clock advance before the step
		op     string        // put, forget, get
		key    string
		seq    uint64
		want   uint64 // get's result
		wantN  int    // sessions held after the step (-1: do not check)
		reason string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"remembered until the cursor passes", []step{
			{op: "put", key: "a", seq: 10, wantN: 1},
			{op: "get", key: "a", want: 10, wantN: 1},
			{op: "forget", key: "a", seq: 9, wantN: 1, reason: "cursor short of the range"},
			{op: "forget", key: "a", seq: 10, wantN: 0},
			{op: "get", key: "a", want: 0, wantN: 0},
		}},
		{"a session that never returns is dropped", []step{
			{op: "put", key: "gone", seq: 5, wantN: 1},
			{after: keep, op: "get", key: "other", want: 0, wantN: 1, reason: "one rotation keeps it"},
			{op: "get", key: "gone", want: 5, wantN: 1},
			{after: keep, op: "get", key: "gone", want: 0, wantN: 0, reason: "two rotations drop it"},
		}},
		{"asking again renews the entry", []step{
			{op: "put", key: "a", seq: 5, wantN: 1},
			{after: keep, op: "put", key: "a", seq: 8, wantN: 1},
			{after: keep, op: "get", key: "a", want: 8, wantN: 1},
			{op: "put", key: "a", seq: 6, wantN: 1, reason: "an older range does not go back"},
			{op: "get", key: "a", want: 8, wantN: 1},
		}},
		{"forget reaches the older generation", []step{
			{op: "put", key: "a", seq: 5, wantN: 1},
			{after: keep, op: "get", key: "other", want: 0, wantN: 1, reason: "a rotation moves a to the older generation"},
			{op: "forget", key: "a", seq: 5, wantN: 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
			a := newAskedTable(keep, func() time.Time { return now })
			for i, s := range tt.steps {
				now = now.Add(s.after)
				switch s.op {
				case "put":
					a.put(s.key, s.seq)
				case "forget":
					a.forget(s.key, s.seq)
				case "get":
					if got := a.get(s.key); got != s.want {
						t.Fatalf("step %d (%s): get(%s) = %d, want %d", i, s.reason, s.key, got, s.want)
					}
				}
				if n := a.len(); s.wantN >= 0 && n != s.wantN {
					t.Fatalf("step %d %s(%s) (%s): holds %d sessions, want %d", i, s.op, s.key, s.reason, n, s.wantN)
				}
			}
		})
	}
}
