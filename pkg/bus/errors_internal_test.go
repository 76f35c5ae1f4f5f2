package bus

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestStoreLimitErrorsAreTheServers: StorageFull recognises a stream at its
// limits by the store's words, kept here as constants; they must be the
// server's.
func TestStoreLimitErrorsAreTheServers(t *testing.T) {
	for _, tt := range []struct{ ours, servers string }{
		{errMaxBytes, server.ErrMaxBytes.Error()},
		{errMaxMsgs, server.ErrMaxMsgs.Error()},
		{errMaxMsgsPerSubject, server.ErrMaxMsgsPerSubject.Error()},
	} {
		if tt.ours != tt.servers {
			t.Errorf("ours %q, the server's %q", tt.ours, tt.servers)
		}
	}
}
