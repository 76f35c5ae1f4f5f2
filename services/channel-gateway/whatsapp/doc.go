// Package whatsapp connects a personal WhatsApp account to the fleet as a
// linked device, with go.mau.fi/whatsmeow (the library nanobot's native
// channel wraps).
//
// Linking: the first gateway to hold the account's connection lease finds
// no device in the fleet's WhatsApp bucket and shows QR codes: on the
// status board (so `nanofleet channels login whatsapp` prints them in the
// terminal and the dashboard draws them) and in its log. Once scanned, the
// device — identity and Signal keys, sessions, pre-keys, app state — is
// kept in JetStream KV by package kvstore, not on a gateway's disk: another
// gateway that takes the lease over, or this one after a restart, connects
// as the same device. A device logged out from the phone is forgotten, and
// the next connection shows a QR code again.
//
// One connection per account runs in the fleet (internal/hold); it is the
// only one that can send, so a gateway that takes a reply from the
// outbound stream without holding the connection hands it to the holder
// over core NATS (P.whatsapp.send.<account>) and reports the holder's
// outcome; with no holder the reply is retried.
//
// Which messages count: direct chats per dmPolicy (pairing codes by
// default), then allowFrom (phone numbers or LIDs, as in the JID's user
// part); in groups, those that mention the account or reply to one of its
// messages (groupPolicy "mention", the default), all ("open"), those of
// the groups in groupAllowFrom ("allowlist"), or none ("disabled"). The
// account's own messages and status broadcasts are skipped; an event
// without id, chat, sender or message is logged and dropped. Text,
// captions, quoted messages (prefixed as a "> " quote), images, voice
// notes, audio, documents, video and stickers are taken; media are
// downloaded by their direct path from the media hosts WhatsApp's server
// names (never from the URL the sender wrote into the message), read up
// to the media limit whatever length the message announces, decrypted by
// whatsmeow and copied into the object store.
// A message is acknowledged to WhatsApp only once it is stored (or a
// policy refused it): one the fleet could not store (publishing is tried
// again for 20 s) is left unacknowledged, and WhatsApp gives it again at
// the next connection, which whatsmeow replays from its decrypted event
// buffer (kept in the bucket too). The message id is the inbound id, so
// a message delivered twice is stored once.
//
// Replies are rendered WhatsApp's way (*bold*, _italic_, ~strike~,
// ```mono```) and split on paragraph boundaries at [Limit]; in groups the
// first piece quotes the asking message; a retried delivery, on this
// gateway or another, continues with the first piece (or attachment) not
// yet sent (internal/parts). Attachments of a reply are read
// from the object store, uploaded and sent after the text as image,
// audio (Ogg as a voice note), video or document messages, a link as
// text; one gone from the store, empty or over [UploadLimit] is a note in
// the chat instead. "composing" presence is set
// while a turn runs and cleared after the answer.
//
// Inbound metadata, which the worker copies onto its replies: sender (the
// sender's JID), is_group, push_name, quote_text (the start of the text,
// for the reply's quote), reply_to_id (the message the user replied to).
package whatsapp
