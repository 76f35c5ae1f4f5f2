// Package openaiapi lets any OpenAI client talk to the fleet:
// POST /v1/chat/completions (streamed as server-sent events or not) and
// GET /v1/models, with bearer-token auth.
//
// The fleet keeps the conversation, so a request is one turn: the last
// user message of the request becomes the inbound message (earlier
// messages are the client's copy of a history the session already has).
// The session is chosen by the X-Session-Id header, else the request's
// "user" field, else "default"; it is the chat id on the "api" channel
// (session "api:<id>"). The "user" field, else "api", is the sender: the
// person user-scoped memory, usage and daily budgets belong to. An Idempotency-Key header makes a retried request
// the same inbound message: its publish is dropped as a duplicate within
// the inbound stream's duplicate window, and it reads the chat's replies
// from the start of that window, so it gets the first request's answer
// whether that is still running or already out. The OpenAI SDKs retry
// without a key but number their attempts (X-Stainless-Retry-Count): for
// them the body is the key, and only a retry (attempt 1 or later) joins
// an earlier identical request; attempt 0 of a body already stored is the
// question asked again and runs a turn of its own.
//
// The answer is the turn's final reply, read from the chat's outbound
// subject by an ordered consumer started before the message is published;
// a streaming request asks the worker for deltas (metadata stream=true)
// and relays them from the chat's live subject. Replies of
// other requests in the same session (matched by reply_to) are ignored.
// Message-tool sends during the turn are part of the answer. A turn that
// fails answers 502 with the worker's error; one that takes longer than
// the timeout answers 504. A message the fleet refuses answers at once:
// 413 when too large, 507 when its store is full. Every error is
// OpenAI-shaped JSON, 404 and 405 included.
package openaiapi
