// Package telegram connects a Telegram bot to the fleet through the Bot API
// (github.com/go-telegram/bot).
//
// Receiving: long polling, or a webhook whose requests must carry the
// configured secret token. Only one poller per bot token may run in the
// whole fleet (Telegram answers a second one with 409 Conflict and both
// lose updates), so polling is guarded by a lease in the fleet's lease
// bucket, renewed while polling; a second gateway logs that it is waiting
// and takes over when the first stops. Each update's id is the inbound
// message id, so an update fetched twice (after a takeover, or a webhook
// retried) is stored once. Malformed updates are logged and skipped.
//
// Before publishing, the access gate decides: groups answer only when the
// bot is mentioned (groupPolicy "mention", the default) or always
// ("open"); unknown senders get nothing, or a pairing code in a private
// chat. Photos, voice notes, audio, video and documents are copied into the
// object store and passed as media references.
//
// Delivering: Markdown is rendered as Telegram HTML and, when Telegram
// rejects the entities, sent again as plain text; answers longer than
// about 4000 characters are split on paragraph boundaries (a piece whose
// text would still be over Telegram's 4,096 once rendered, as a table
// padded to its widest cell can be, is split again). The reply's
// attachments follow its text (images up to the Bot API's 10 MB as
// photos, the rest as documents; one the store no longer holds, empty, or
// over the 50 MB a bot may upload, as a plain-text note naming it, with no
// upload: internal/media's Load), counted as pieces after it: a retried delivery, on this gateway or
// another, continues with the first piece or attachment not yet sent
// (internal/parts). The first piece
// replies to the message that asked (metadata "message_id"). Rate limits
// (429) are retried after Telegram's retry_after. A typing indicator runs
// from the moment a message is published until its answer appears on the
// outbound subject. Progress and tool hints are sent as separate messages
// when enabled. With streaming on, the answer is shown while it is written
// by editing one message (editMessageText, at most once per
// streamEditInterval; see internal/editstream).
//
// Inbound metadata, which the worker copies onto its replies: message_id,
// chat_type, thread_id (forum topics), username, and stream=true when
// streaming.
package telegram
