// Package discord connects a Discord bot to the fleet: gateway events
// over a WebSocket, answers over the REST API.
//
// Library: github.com/disgoorg/disgo, used as its two parts (the gateway
// and the REST client) without its bot framework or cache. It is chosen
// over bwmarrin/discordgo because every endpoint is set per client
// (rest.WithURL, gateway.WithURL) rather than in package variables, so a
// test can point one adapter at a fake Discord without global state; it
// hands out raw event payloads, so the adapter decides what is malformed;
// it can resume a given session id and sequence number, which the
// takeover below needs; and it honours Discord's rate limits (buckets,
// 429 with Retry-After) by itself. It is actively maintained and follows
// the current API version (v10).
//
// Receiving: only one gateway connection per bot runs in the fleet, held
// under a lease in the fleet's lease bucket (internal/hold).
// After each message it handles, the holder saves its gateway session id
// and sequence number in the <PREFIX>_discord KV bucket; the gateway that
// takes the lease over (after a stop, or after the holder died and its
// lease expired) resumes that session, and Discord replays the events it
// missed. A message's snowflake id is the inbound message id, so an event
// replayed twice is stored once. It asks for the message-content intent,
// which must be enabled for the bot in the developer portal; Discord
// refusing it (close code 4014) or the token (4004) stops the adapter with
// an error naming the cause. Malformed MESSAGE_CREATE payloads are logged
// and dropped.
//
// Which messages count: direct messages per the DM policy; in guild
// channels and threads, messages that mention the bot or reply to it
// (groupPolicy "mention", the default), all messages ("open"), or all
// messages of the channels or guilds in groupAllowFrom ("allowlist").
// Then the access gate admits the sender or not (pairing codes in DMs).
// A thread is its own channel id, so its own session. Attachments are
// copied into the object store.
//
// Delivering: Discord renders Markdown itself; answers longer than 2000
// characters are split on paragraph boundaries. The reply's attachments
// follow its text as uploads (one the store no longer holds, empty, or
// over UploadLimit, as a note naming it, with no upload: internal/media's
// Load; one Discord refuses, as a note too), counted as pieces after it: a retried
// delivery, on this gateway or another, continues with the first piece or
// attachment not yet sent (internal/parts). The first piece is a reply
// (message_reference) to the message that asked. Each piece carries an
// enforced nonce derived from the reply id, so a request repeated after a
// lost answer creates no second message. Answers never ping @everyone,
// roles or users. A typing indicator runs while a turn does. With
// streaming on, the answer is shown while it is written by editing one
// message (see internal/editstream). Progress and tool hints are sent as
// separate messages when enabled, progress in italics with its asterisks
// and backslashes escaped, then cut to fit.
//
// Inbound metadata, which the worker copies onto its replies: message_id,
// guild_id (not in DMs), username, is_group, and stream=true when
// streaming.
package discord
