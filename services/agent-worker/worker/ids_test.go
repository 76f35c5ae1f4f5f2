package worker

import "testing"

// The formats are part of the wire contract: replies are deduplicated on
// the outbound stream by their ids, and a restarted worker finds its
// leases by their owner.
func TestIDs(t *testing.T) {
	tests := []struct {
		name, got, want string
	}{
		{"turn", turnID(42), "in42"},
		{"turn at the first sequence", turnID(1), "in1"},
		{"first reply", replyID(turnID(42), 0), "in42:0"},
		{"third reply", replyID(turnID(7), 2), "in7:2"},
		{"lease owner", leaseOwner("w-1", 42), "w-1/42"},
		{"lease owner of a host-named worker", leaseOwner("host/123/abc", 9), "host/123/abc/9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}
