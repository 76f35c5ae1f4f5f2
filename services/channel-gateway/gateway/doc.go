// Package gateway is the core of the channel-gateway: it runs the platform
// adapters, publishes what they receive as inbound messages, and delivers
// the fleet's replies to them.
//
// Delivery guarantees: each channel has a durable pull consumer on the
// outbound stream, so a gateway restart loses no reply. A reply is acked
// only after its adapter delivered it; a retryable failure (429, 5xx) is
// retried with backoff, honouring the platform's retry-after; a reply whose
// retries are spent, or whose failure is permanent, goes to the dead-letter
// subject with the platform's error. Each delivered reply id is remembered
// for a day (also when the delivery ends as the gateway stops), so a reply
// redelivered after a lost ack is not sent twice.
//
// Progress, tool hints and streaming deltas arrive on core NATS and are
// handed to adapters that implement [LiveAdapter]; they are best effort,
// and none of a turn is handed on after the turn's last reply: that reply
// waits (at most 5 s) for the turn's live delivery under way, and the
// turn's live messages waiting or arriving later are dropped.
package gateway
