// Package bus connects a nanofleet service to NATS JetStream, an external
// server or cluster or one embedded in the process (package embeddednats,
// which only the all-in-one links), and provisions the streams and buckets
// the fleet keeps its state in.
//
// Each package that keeps state in JetStream declares its assets once, as a
// [Declare] (e.g. memory.Assets); the core ones are [CoreAssets]. Nothing
// else creates a stream or bucket: [Provision] creates the core assets and
// the declared ones, all with the layout's replicas, and the packages only
// open them. Provisioning is idempotent: every service calls it at start-up
// with the declarations it uses. A setting that changed since the last
// start is applied where JetStream can update it in place; where it cannot,
// start-up fails naming the stream and the server's reason, so that no
// service runs against a half-changed layout. A client of a running fleet
// calls [CheckLayout] instead and changes nothing.
//
// [Retry] retries a call while it fails for a [Transient] reason, waiting
// by a capped, jittered [backoff.Backoff]: a slow or restarting cluster delays a
// service, it does not stop it.
package bus
