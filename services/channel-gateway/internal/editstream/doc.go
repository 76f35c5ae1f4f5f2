// Package editstream shows an answer while the model writes it, on
// platforms that can edit a sent message (Telegram, Slack, Discord,
// Feishu, DingTalk): the first delta of a turn posts one message at once,
// later deltas edit it at most once per interval, and the final answer
// replaces its text whole.
//
// Fleet-wide: every gateway running the channel follows the channel's
// live subject (deltas) and outbound subject (final answers) itself, so
// each sees a turn's deltas whole and in order; one of them, the first to
// create the turn's entry in the <PREFIX>_streams KV bucket, posts and
// edits. When the final answer appears on the outbound subject, that owner
// makes the final edit and records the outcome in the entry. The gateway
// that delivers the durable final reply asks [Streams.Finish], which waits
// for the outcome (locally, or through the entry when another gateway owns
// the stream).
//
// Guarantees: at most one post or edit per interval per turn, the final
// edit included; the final text is delivered whole exactly once — by the
// final edit, or, when the stream failed (a post or edit error), never
// began, or its owner did not report in time, by the adapter's ordinary
// delivery, which Finish asks for by returning false; the partial message
// is then deleted where the platform allows ([Deleter]). Deltas that
// arrive after the final answer are dropped.
package editstream
