// Package llm is the fleet's model provider client: OpenAI-compatible chat
// completions through go-openai, with presets for the common hosts (see
// Presets), streaming, tool calls, reasoning_content, retries and fallback
// models.
//
// # Requests
//
// Tools are sent sorted by name so the prompt prefix stays stable and
// provider-side prompt caching works. Images attached to user messages
// (MediaRef with an http(s) or data: URL) become image_url content parts.
// With Request.OnDelta set the call streams: OnDelta receives each piece of
// content and reasoning on the calling goroutine, and Chat still returns the
// whole assembled Response, tool calls included.
//
// # Retries
//
// Each attempt is bounded by Config.Timeout. An attempt that fails with 408,
// 409, 429 or a 5xx status, a network error, or its own timeout is retried up
// to Config.MaxRetries times for the same model. Before each retry Chat waits
// the Retry-After (or retry-after-ms) the provider sent, seconds or HTTP
// date; without one it backs off exponentially with jitter (a random wait in
// [d/2, d], d = base·2ⁿ capped, see WithBackoff). A Retry-After longer than
// WithMaxRetryAfter ends the retries at once. Other 4xx answers, invalid
// requests and the caller's cancellation are not retried. The wait goes
// through the SleepFunc given with WithSleep, so tests need not sleep.
//
// A 429 does not use up Config.MaxRetries: it is retried (after its
// Retry-After, or the backoff) for as long as the waits it asked for add
// up to less than the rate-limit patience (WithRateLimitPatience, default
// 3 minutes), so a rate-limit storm slows turns down instead of failing
// them.
//
// # Concurrency
//
// Config.MaxConcurrent bounds the calls in flight from one Provider (the
// presets of local servers set one); the calls over it wait in arrival
// order without holding a connection. A 429 halves the bound to half of
// what was in flight (once per burst: calls sent before the cut do not
// cut again) and each success raises it by one, back up to the configured
// bound, so the provider sets the pace while it refuses.
//
// # Fallback
//
// When the request's model has failed (retries exhausted or a non-retryable
// answer), Config.FallbackModels are tried in order, each with its own
// retries. Fallback is skipped when the caller's context is done, the
// request is invalid (ErrInvalidRequest), the credentials are refused (401,
// 403) — every model would fail alike — or a stream failed after OnDelta
// had been called (ErrStreamInterrupted): the caller has already shown part
// of an answer, so nothing is replayed. A stream whose body ends without a
// finish reason was cut (a dropped connection, our own deadline), not
// finished: it fails, with io.ErrUnexpectedEOF or the context's error.
//
// # Errors
//
// Failures are wrapped with the provider, model and attempt. HTTP errors
// are *APIError (errors.As) carrying the status and unwrapping to the
// go-openai error; errors.Is(err, ErrRateLimited) matches a 429. When
// several models failed, the error joins each model's error, the primary's
// first. A timed-out attempt matches context.DeadlineExceeded. A response
// body, a stream's whole included, past MaxResponseBytes fails with
// ErrResponseTooLarge and is not retried: read whole, a 200 MB answer took
// an all-in-one to 1.1 GB resident, and a turn stores a few MiB at most.
package llm
