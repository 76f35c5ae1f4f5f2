// Package webchat serves a single-page chat with the assistant from the
// gateway's HTTP listener: a conversation list, answers streamed as they
// are generated, progress and tool hints shown inline (collapsible),
// Markdown and code rendered, file upload, and conversations that survive a
// reload.
//
// Access is by token, the way Jupyter does it: the gateway logs a login
// link http://host:port/?token=…; opening it sets a cookie, and the page
// and its API then work without the token in the URL. A token is generated
// at start when none is configured. The WebSocket endpoint also checks the
// Origin, so other sites cannot drive the chat with the user's cookie.
//
// Each conversation is a chat on the "web" channel (session "web:<id>").
// A message typed in the page is published as an inbound message; the page's
// WebSocket follows the conversation's outbound subject (final answers,
// errors) and live subject (deltas, progress, tool hints) through a
// [watch.Watcher], so any gateway can serve any browser. The history shown
// after a reload is read from the session store, and the conversation list
// lives in the <PREFIX>_webchat KV bucket. Files are stored in the object
// store under web/<conversation>/ and sent with the next message; a file
// over the size limit is refused with a message the page shows.
//
// [watch.Watcher]: github.com/nanofleet/nanofleet/services/channel-gateway/internal/watch
package webchat
