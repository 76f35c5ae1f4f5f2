// Package feishu connects a Feishu (or Lark) custom app to the fleet with
// the official SDK, github.com/larksuite/oapi-sdk-go/v3: its open API
// client (tenant token, messages, resources), event types and webhook
// crypto. Its long-connection frame type is compiled from a copy of its
// .proto (proto/feishu/pbbp2), as linking the SDK's ws package would
// link its client for every API service.
//
// Receiving, two modes. "websocket" (default) holds the platform's long
// connection, so no public URL is needed: endpoint discovery, then
// protobuf frames; events split over several frames are joined. The
// connection is held here, not by the SDK's ws.Client, whose Start can
// be neither cancelled nor stopped; only the gateway holding the fleet's
// lease for the app connects, another takes over within the lease TTL.
// "webhook" serves webhook.path (default /hooks/feishu) on the gateway's
// HTTP listener: an event's X-Lark-Signature is checked over the raw body
// before the body is decrypted with encryptKey, and signed requests
// replayed are refused (a timestamp more than [ReplayWindow] (5 min) from
// now, or a nonce already handled, kept fleet-wide in P_feishu-nonces).
// The URL challenge, which the platform does not sign, is answered when
// it decrypts to its verification token. Every refusal is the same 401,
// whatever failed, so that no answer tells whether a forged body
// decrypted. Any gateway can take webhook requests.
//
// An event is answered (frame response or HTTP 200) only after it was
// stored, or found malformed (logged and dropped); a failure to store
// answers 500, so the platform sends it again. The event id is the
// inbound message id, so an event sent twice is stored once. Events are
// handled one at a time, in order.
//
// Which messages count: one-to-one chats per dmPolicy (pairing codes by
// default); in groups, messages that mention the bot (groupPolicy
// "mention", the default), all messages ("open"), or all messages of the
// chats in groupAllowFrom ("allowlist"). Then allowFrom (open ids, user
// ids or union ids) admits the sender or not. Text, post (rich text,
// flattened to Markdown), image, file, audio and video messages are taken;
// images and files are copied into the object store.
//
// Replies quote the asking message (im/v1 reply) or, without one (pairing
// codes), are sent to the chat. replyFormat picks an interactive card
// with a markdown element (default), a post with an md element, or plain
// text. Long answers are split on paragraph boundaries at [Limit], and
// again where a piece's request would be over the platform's 150 KB
// (text) or 30 KB (card, post) once its content is JSON-escaped; each
// piece carries a uuid derived from the reply id, so the platform drops a
// piece sent twice after a lost answer, and each piece the platform took
// is recorded fleet-wide (internal/parts) before the next, so a reply
// redelivered to another gateway continues after it. Rate limits (HTTP 429, code
// 99991400 or 230020) are retried after x-ogw-ratelimit-reset.
//
// A reply's attachments follow its text, read from the object store:
// images up to 10 MB are uploaded to im/v1/images and sent as image
// messages, other files (and larger images) up to 30 MB to im/v1/files
// and sent as file messages, each with its own uuid. An attachment the
// platform cannot take (over 30 MB, empty, refused) or the store no longer
// holds becomes a text message naming it, so the reply still arrives
// whole and the user knows what is missing.
//
// The SDK keeps tenant access tokens in a process-wide cache keyed by app
// id; one gateway process runs one adapter per app, so that is harmless.
//
// With streaming on, the inbound metadata asks the worker for deltas
// (stream=true), and the answer is shown in one interactive card posted
// at the first delta and updated (PATCH, an update_multi card) at most
// once per streamEditInterval (default 1 s), the final update carrying
// the answer's first piece; internal/editstream coordinates this across
// gateways. When an update fails, the partial card is deleted (DELETE
// im/v1/messages/:message_id) and the answer is sent whole as usual.
//
// Inbound metadata, which the worker copies onto its replies: message_id,
// chat_type, thread_id, and stream when streaming.
package feishu
