package fleetstatus

import (
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Version is the version services announce.
const Version = "0.1.0"

// Register announces a running service instance (e.g. [WorkerService])
// to micro discovery, so that `nanofleet status` and the dashboard count
// it. It serves no endpoints; stop removes the announcement.
func Register(nc *nats.Conn, name, id string) (stop func(), err error) {
	svc, err := micro.AddService(nc, micro.Config{
		Name:     name,
		Version:  Version,
		Metadata: map[string]string{"id": id},
	})
	if err != nil {
		return nil, fmt.Errorf("register %s with discovery: %w", name, err)
	}
	return func() { _ = svc.Stop() }, nil
}

// DefaultID is the id of an instance not given one: hostname-pid, unique
// among the running instances and telling the operator where each runs.
func DefaultID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}
