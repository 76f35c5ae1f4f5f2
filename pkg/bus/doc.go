// Package bus connects a nanofleet service to NATS JetStream: to an
// external server or cluster, or to a nats-server embedded in the process,
// and provisions the streams and buckets the fleet keeps its state in.
//
// Provisioning is idempotent: every service calls [Provision] at start-up.
// A setting that changed since the last start is applied where JetStream can
// update it in place; where it cannot, start-up fails naming the stream and
// the server's reason, so that no service runs against a half-changed layout.
package bus
