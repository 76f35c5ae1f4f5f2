package llm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/nanofleet/nanofleet/pkg/backoff"
	"github.com/nanofleet/nanofleet/pkg/httplimit"
	"github.com/nanofleet/nanofleet/pkg/observe"
)

// callInfo records, for one attempt, what go-openai's errors do not carry:
// the response headers and whether the transport itself failed. The doer
// finds it in the request's context.
type callInfo struct {
	retryAfter   string
	retryAfterMs string
	transportErr error
	// tools is the encoded tools array the doer adds to the body.
	tools []byte
}

type callInfoKey struct{}

func withCallInfo(ctx context.Context) (context.Context, *callInfo) {
	info := &callInfo{}
	return context.WithValue(ctx, callInfoKey{}, info), info
}

// doer wraps the HTTP client handed to go-openai: it adds the extra headers
// and the attempt's encoded tools, and records Retry-After and transport
// failures in the attempt's callInfo.
type doer struct {
	next    openai.HTTPDoer
	headers map[string]string
}

func (d *doer) Do(req *http.Request) (*http.Response, error) {
	for k, v := range d.headers {
		req.Header.Set(k, v)
	}
	info, ok := req.Context().Value(callInfoKey{}).(*callInfo)
	if ok && info.tools != nil {
		if err := addTools(req, info.tools); err != nil {
			return nil, err
		}
	}
	resp, err := d.next.Do(req)
	if ok {
		if err != nil {
			info.transportErr = err
		} else {
			info.retryAfter = resp.Header.Get("Retry-After")
			info.retryAfterMs = resp.Header.Get("Retry-After-Ms")
		}
	}
	if err == nil {
		httplimit.Limit(resp, MaxResponseBytes, ErrResponseTooLarge)
	}
	return resp, err
}

// apiErrorFrom turns a go-openai status error into an *APIError, or returns
// nil when err carries no HTTP status.
func apiErrorFrom(err error, info *callInfo, now time.Time) *APIError {
	var (
		status int
		msg    string
	)
	var oe *openai.APIError
	var re *openai.RequestError
	switch {
	case errors.As(err, &oe) && oe.HTTPStatusCode != 0:
		status, msg = oe.HTTPStatusCode, oe.Message
	case errors.As(err, &re) && re.HTTPStatusCode != 0:
		// Excerpt cuts on a character boundary: the message reaches the
		// user in a proto string, which refuses half a character.
		status, msg = re.HTTPStatusCode, observe.Excerpt(bytes.TrimSpace(re.Body))
	default:
		return nil
	}
	ae := &APIError{Status: status, Message: msg, Err: err}
	if info != nil {
		if d, ok := parseRetryAfterMs(info.retryAfterMs); ok {
			ae.RetryAfter, ae.retryAfterSet = d, true
		} else if d, ok := backoff.RetryAfter(info.retryAfter, now); ok {
			ae.RetryAfter, ae.retryAfterSet = d, true
		}
	}
	return ae
}

func parseRetryAfterMs(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	ms, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(max(ms, 0) * float64(time.Millisecond)), true
}

// retryable reports whether an attempt's error is worth another attempt.
// parent is the caller's context: once it is done nothing is retried, but a
// per-attempt timeout is.
func retryable(parent context.Context, err error, info *callInfo) bool {
	if parent.Err() != nil {
		return false
	}
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Temporary()
	}
	switch {
	case errors.Is(err, ErrInvalidRequest), errors.Is(err, ErrStreamInterrupted), errors.Is(err, ErrResponseTooLarge):
		return false
	case info != nil && info.transportErr != nil:
		return true
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNREFUSED):
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// Temporary reports whether err, a model call's failure, may pass when the
// call is made again later (a rate limit, a server error, the network);
// refused credentials, a missing key or a malformed request will not.
func Temporary(err error) bool { return retryable(context.Background(), err, nil) }

// fallbackable reports whether, after a model has failed, another model is
// worth trying: not when the caller gave up, the credentials are wrong, the
// request itself is malformed, or part of a stream was already delivered.
func fallbackable(parent context.Context, err error) bool {
	if parent.Err() != nil || errors.Is(err, ErrInvalidRequest) || errors.Is(err, ErrStreamInterrupted) {
		return false
	}
	var ae *APIError
	if errors.As(err, &ae) && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden) {
		return false
	}
	return true
}
