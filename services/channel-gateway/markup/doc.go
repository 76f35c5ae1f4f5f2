// Package markup turns the agent's Markdown into what each chat platform
// shows: Telegram's HTML subset, Slack's mrkdwn, and plain safe HTML for the
// web chat. It also splits long answers into platform-sized messages on
// paragraph boundaries.
//
// Rendering never fails: Markdown is parsed leniently (CommonMark with the
// GFM extensions), raw HTML in the source is shown as text, and everything
// a platform would interpret is escaped. Split works on the Markdown source,
// so every piece renders on its own; a code block cut in two is closed at
// the end of one piece and reopened at the start of the next. Rendering
// can make a piece longer (escapes, a table padded on every row), so
// SplitRendered and TruncateRendered cut for platforms that count what a
// piece becomes, measured by the caller.
package markup
