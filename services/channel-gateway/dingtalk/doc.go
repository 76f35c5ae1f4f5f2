// Package dingtalk connects a DingTalk robot to the fleet in stream mode,
// so the gateway needs no public URL. It speaks the protocol of
// github.com/open-dingtalk/dingtalk-stream-sdk-go with that SDK's frame,
// endpoint and robot message types.
//
// Receiving: POST /v1.0/gateway/connections/open hands out a WebSocket
// endpoint and ticket; JSON data frames carry SYSTEM pings (answered with
// their data), SYSTEM disconnects (the adapter reconnects) and CALLBACK
// robot messages. The connection is held here, not by the SDK's
// StreamClient, which reconnects on its own with a background context and
// handles frames concurrently, so it could be neither stopped when this
// gateway loses the lease nor kept in order. Only the gateway holding the
// fleet's lease for the app connects; another takes over within the lease
// TTL. A robot message is acknowledged after it was stored, or found
// malformed (logged and dropped); a failure to store answers 500, so the
// platform sends it again. The message's msgId is the inbound message id,
// so a message sent twice is stored once.
//
// Which messages count: one-to-one chats per dmPolicy (pairing codes by
// default); in groups, messages that mention the robot (groupPolicy
// "mention", the default), all it receives ("open"), or those of the
// conversations in groupAllowFrom ("allowlist"). Then allowFrom (staff
// ids) admits the sender or not. Text, rich text, pictures, files, audio
// (with DingTalk's recognition as text) and video are taken; files are
// copied into the object store through the robot file download.
//
// Chat ids: a one-to-one chat is the user's staff id, a group its
// conversation id (cid…), the two forms the robot send API takes, so a
// reply needs nothing else (pairing codes carry no metadata).
//
// Replies are markdown, split on paragraph boundaries at [Limit]. Each
// goes through the asking message's session webhook while it is valid
// (until 30 s before its announced expiry); when it has expired, or the
// platform refuses it, through the robot send API with the app's access
// token (oToMessages/batchSend for a user, groupMessages/send for a
// group). Rate limits (HTTP 429 with Retry-After, the webhook's errcode
// 130101, flow-controlled staff ids) are retried after the wait.
//
// DingTalk has no idempotency key, so a piece it took is recorded in the
// gateway's delivered bucket (internal/parts.Store) before the next
// starts, and a piece in flight is finished, not cut off, when the
// gateway stops: a reply redelivered after a lost ack, on this gateway or
// another, sends only what was not sent. What remains is a crash (not a
// stop) between DingTalk's answer and that record.
//
// A reply's attachments follow its text through the robot API (a session
// webhook takes neither pictures nor files): uploaded from the object
// store with the older oapi's media/upload (oapiUrl), then sent as
// sampleImageMsg (JPEG, PNG, GIF, BMP) or sampleFile (doc(x), xls(x),
// ppt(x), pdf, zip, rar), up to 20 MB. Anything else, or an attachment the
// store no longer holds, becomes a text message naming it.
//
// With streaming on and an AI card template (cardTemplateId, a template
// with a markdown variable "content"), the inbound metadata asks the
// worker for deltas (stream=true), and the answer is shown in one AI card
// created and delivered at the first delta
// (card/instances/createAndDeliver), its content replaced at most once
// per streamEditInterval (default 1 s) through card/streaming, the final
// update carrying the answer's first piece and finalizing the card;
// internal/editstream coordinates this across gateways. When an update
// fails, the answer is sent whole as usual. Streaming without a template
// logs a warning and sends answers whole.
//
// Inbound metadata, which the worker copies onto its replies:
// conversation_type, conversation_id, is_group, session_webhook,
// session_webhook_expires (Unix milliseconds), and stream when streaming.
package dingtalk
