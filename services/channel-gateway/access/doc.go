// Package access decides who may talk to the assistant, before anything is
// published into the fleet.
//
// Each channel has a [Policy]: an allowFrom list of sender ids or user
// names ("*" admits everyone) and a DM policy. A sender who is not allowed
// is dropped silently in groups. In a direct message, under the default
// "pairing" DM policy, they get a short code instead; the owner approves
// it with `nanofleet pairing approve CODE` ([Approve]) or by sending
// `/pairing approve CODE` from an allowed account, and from then on the
// sender is allowed on that channel. Codes expire (one hour by default).
//
// State lives in two JetStream KV buckets, so every gateway of the fleet
// sees the same approvals: <PREFIX>_pairing (codes, with a TTL) and
// <PREFIX>_access (approved senders, kept until deleted). Messages to the
// sender (the code, the approval) are published as durable replies on the
// channel's outbound subject with deterministic ids, so the gateway
// delivers each once.
package access
