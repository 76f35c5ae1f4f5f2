package bustest

import (
	"fmt"
	"net"
	"testing"
	"time"
)

// TestClusterNodeStartsOnNewPortsWhenItsOwnAreTaken: a node whose client
// port was taken after it was chosen (by another process, or as the local
// port of a connection) starts on new ports and joins the cluster; it
// waited 30 s and failed the test, "not ready for connections", without a reason.
func TestClusterNodeStartsOnNewPortsWhenItsOwnAreTaken(t *testing.T) {
	c := NewCluster(t, 3, 1, 2)
	taken, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", c.nodes[0].opts.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	c.Start(0)
	if c.nodes[0].srv == nil {
		t.Fatal("node 0 not running")
	}
	if got := c.nodes[0].opts.Port; got == taken.Addr().(*net.TCPAddr).Port {
		t.Fatalf("node 0 still on the taken port %d", got)
	}
	c.WaitJetStream(30 * time.Second)
}
