package dingtalk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// oapiAnswer is how the older APIs (session webhooks, media upload)
// answer: errcode 0, or an error.
type oapiAnswer struct {
	ErrCode int    `json:"errcode"`
	ErrMsg  string `json:"errmsg"`
}

// call posts body to an open API path with the app's access token and
// decodes the answer into out; errors are delivery errors.
func (a *Adapter) call(ctx context.Context, path string, body, out any) error {
	return a.callMethod(ctx, http.MethodPost, path, body, out)
}

// callMethod is call with another HTTP method.
func (a *Adapter) callMethod(ctx context.Context, method, path string, body, out any) error {
	tok, err := a.accessToken(ctx)
	if err != nil {
		return err
	}
	data, err := json.Marshal(body)
	if err != nil {
		return gateway.Permanent(fmt.Errorf("dingtalk: encode %s: %w", path, err))
	}
	resp, raw, err := a.request(ctx, method, path, a.api+path, "application/json", bytes.NewReader(data), http.Header{"X-Acs-Dingtalk-Access-Token": {tok}})
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, out); err != nil {
			return gateway.Retry(fmt.Errorf("dingtalk: %s answer: %w", path, err), 0)
		}
		return nil
	}
	e := &apiError{Status: resp.StatusCode}
	_ = json.Unmarshal(raw, e)
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || strings.Contains(e.Code, "QpsLimit") || strings.HasPrefix(e.Code, "Throttling"):
		return gateway.Retry(e, max(retryAfter(resp.Header), time.Second))
	case resp.StatusCode == http.StatusUnauthorized || e.Code == "InvalidAuthentication":
		a.mu.Lock()
		a.token = "" // fetched again on the retry
		a.mu.Unlock()
		return gateway.Retry(e, 0)
	case resp.StatusCode >= 500:
		return gateway.Retry(e, 0)
	}
	return gateway.Permanent(e)
}

// post sends body to url with header and returns the answer, read (at
// most 1 MiB) and closed; what names the call in errors, which are
// delivery errors (a transport failure is worth a retry).
func (a *Adapter) post(ctx context.Context, what, url, contentType string, body io.Reader, header http.Header) (*http.Response, []byte, error) {
	return a.request(ctx, http.MethodPost, what, url, contentType, body, header)
}

// request is post with another HTTP method.
func (a *Adapter) request(ctx context.Context, method, what, url, contentType string, body io.Reader, header http.Header) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, nil, gateway.Permanent(fmt.Errorf("dingtalk: %s: %w", what, err))
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, nil, gateway.Retry(fmt.Errorf("dingtalk: %s: %w", what, err), 0)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp, raw, nil
}

// accessToken returns the app's access token, fetching a new one when the
// cached one is within five minutes of expiry.
func (a *Adapter) accessToken(ctx context.Context) (string, error) {
	a.mu.Lock()
	if a.token != "" && a.now().Before(a.expires) {
		defer a.mu.Unlock()
		return a.token, nil
	}
	a.mu.Unlock()
	data, _ := json.Marshal(map[string]string{"appKey": a.cfg.ClientID, "appSecret": a.cfg.ClientSecret})
	resp, raw, err := a.post(ctx, "access token", a.api+"/v1.0/oauth2/accessToken", "application/json", bytes.NewReader(data), nil)
	if err != nil {
		return "", err
	}
	var out struct {
		AccessToken string `json:"accessToken"`
		ExpireIn    int64  `json:"expireIn"`
		Code        string `json:"code"`
		Message     string `json:"message"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || resp.StatusCode != http.StatusOK || out.AccessToken == "" {
		e := fmt.Errorf("dingtalk: access token: HTTP %d %s %s", resp.StatusCode, out.Code, out.Message)
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			return "", gateway.Retry(e, retryAfter(resp.Header))
		}
		return "", gateway.Permanent(e)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.token = out.AccessToken
	a.expires = a.now().Add(time.Duration(out.ExpireIn)*time.Second - 5*time.Minute)
	return a.token, nil
}
