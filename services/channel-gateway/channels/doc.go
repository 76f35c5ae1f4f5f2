// Package channels is the channel-gateway's channels section and the
// constructor that turns it into running parts: [Config] holds nanobot's
// channels.<name> keys (enabled, token, allowFrom, groupPolicy, streaming,
// sendProgress, sendToolHints, and each platform's own), and [Build]
// returns the platform adapters for [gateway.New] plus the HTTP handler the
// gateway serves on its --listen address (web chat at /, the
// OpenAI-compatible API at /v1/, the Telegram webhook at its path).
//
// Tokens the configuration leaves empty (web chat, API) are generated once
// and kept in the <PREFIX>_gateway KV bucket, so every gateway of the fleet
// accepts the same token and a restart does not log everyone out.
//
// The worker contract the channels rely on: a reply carries the inbound
// message's metadata (Telegram's message_id and thread_id, Slack's
// thread_ts), its id in reply_to, and the inbound session key; deltas are
// published on the live subject when the inbound metadata has
// stream=true (the web chat always asks, the API when the request
// streams, Telegram, Slack and Discord when their streaming key is on).
//
// [gateway.New]: github.com/nanofleet/nanofleet/services/channel-gateway/gateway
package channels
