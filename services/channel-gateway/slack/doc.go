// Package slack connects a Slack app to the fleet over Socket Mode
// (github.com/slack-go/slack and its socketmode client), so the gateway
// needs no public URL.
//
// Receiving: every Socket Mode envelope is acknowledged as soon as it is
// read, before any work, so Slack does not resend it; the Events API
// event id is the inbound message id, so an event Slack sends again anyway
// is stored once. Since Slack will not send it again, an event the store
// cannot take for a transient reason (NATS unreachable, a stream without
// a leader) is tried again for up to a minute before it is logged as
// lost. Malformed envelopes and events are logged, acknowledged and
// dropped. Events are handled one at a time, in the order Slack sent
// them.
//
// Which messages count: direct messages per the DM policy (the nested
// nanobot-style "dm" object: enabled, policy, allowFrom); in channels,
// messages that mention the bot (groupPolicy "mention", the default), all
// messages ("open"), or all messages of the channels in groupAllowFrom
// ("allowlist"). Slack sends both a message and an app_mention event for a
// mention; the app_mention is the one used. Then the access gate admits
// the sender or not (pairing codes in DMs). Shared files are downloaded
// with the bot token into the object store, only from the Web API's host
// or its subdomains (files.slack.com); a file elsewhere (a remote file's
// URL is its app's) is named in a note instead.
//
// Replies go to the thread of the message that asked (replyInThread,
// default true), and a channel thread is its own session
// ("slack:<channel>:<thread ts>"). Markdown becomes mrkdwn, long answers
// are split at about 4000 characters, and again where a piece would render
// to more than Slack's 40,000 (a retried delivery, on this gateway
// or another, continues with the first piece not yet sent:
// internal/parts), rate limits (429 with Retry-After) are retried after
// the requested wait. A reply's attachments follow its text in the thread,
// counted as pieces after it: a file is uploaded in Slack's three steps
// (files.getUploadURLExternal, its bytes to the URL that gives,
// files.completeUploadExternal with the channel and thread), up to
// [UploadLimit] (the bot token needs the files:write scope; without it
// Slack answers missing_scope, a refusal); a link is posted as text; one
// gone from the store, empty, over the limit or refused by Slack is a
// note instead. With streaming on, the answer is shown while it is
// written by updating one message (chat.update, at most once per
// streamEditInterval; see internal/editstream).
//
// Inbound metadata, which the worker copies onto its replies: ts,
// thread_ts, channel_type (absent from mentions), is_group, and
// stream=true when streaming.
package slack
