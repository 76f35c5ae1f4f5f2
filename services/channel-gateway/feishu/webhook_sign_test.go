package feishu_test

import (
	"bytes"
	"crypto/aes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/services/channel-gateway/feishu/feishutest"
)

// signing is how a test request is signed.
type signing int

const (
	validSignature signing = iota
	badSignature
	noSignature
)

// postRaw posts body to the webhook as the platform would, signed as
// told, and returns the answer's status and body.
func postRaw(t *testing.T, url string, body []byte, sig signing, nonce string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if sig != noSignature {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		key := webhookKey
		if sig == badSignature {
			key = "another key"
		}
		req.Header.Set("X-Lark-Request-Timestamp", ts)
		req.Header.Set("X-Lark-Request-Nonce", nonce)
		req.Header.Set("X-Lark-Signature", feishutest.Signature(ts, nonce, key, body))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("webhook: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// encrypted is the body {"encrypt": …} of plain encrypted with key.
func encrypted(plain any, key string) []byte {
	data, ok := plain.([]byte)
	if !ok {
		data, _ = json.Marshal(plain)
	}
	body, _ := json.Marshal(map[string]string{"encrypt": feishutest.Encrypt(data, key)})
	return body
}

// badPadding is a body whose cipher text decrypts with the app's key to a
// last block that is not PKCS#7 padded: one block of plain text encrypted
// (padded with a second block), the padding block cut off.
func badPadding() []byte {
	raw, _ := base64.StdEncoding.DecodeString(feishutest.Encrypt([]byte("0123456789abcdex"), webhookKey))
	body, _ := json.Marshal(map[string]string{"encrypt": base64.StdEncoding.EncodeToString(raw[:2*aes.BlockSize])})
	return body
}

// TestWebhookRefusalsLookAlike: the signature is checked over the raw
// body first, and every refusal, whatever failed before or after it
// (signature, body, base64, padding, JSON, token), is the same 401 with
// the same body, so that no answer tells whether a forged body decrypted.
// Only the URL challenge with the app's token is taken unsigned.
func TestWebhookRefusalsLookAlike(t *testing.T) {
	h, url := startWebhook(t, feishutest.Text("ev-0", "ou_ada", "oc_p2p", "p2p", "om_0", "warm-up"))
	event := feishutest.Text("ev-x", "ou_ada", "oc_p2p", "p2p", "om_x", "forged")
	challenge := map[string]any{"type": "url_verification", "token": "vt", "challenge": "c-9"}
	tests := []struct {
		name string
		body []byte
		sig  signing
		want int
	}{
		{"signed, not JSON", []byte("not json"), validSignature, 401},
		{"signed, no encrypt field", []byte(`{"schema": "2.0"}`), validSignature, 401},
		{"signed, encrypt field not base64", []byte(`{"encrypt": "!!!"}`), validSignature, 401},
		{"signed, encrypt field not whole blocks", []byte(`{"encrypt": "` + base64.StdEncoding.EncodeToString([]byte("short")) + `"}`), validSignature, 401},
		{"signed, bad padding", badPadding(), validSignature, 401},
		{"signed, decrypts to no JSON", encrypted([]byte("not json"), webhookKey), validSignature, 401},
		{"signed, encrypted with another key", encrypted(event, "another key"), validSignature, 401},
		{"badly signed, not JSON", []byte("not json"), badSignature, 401},
		{"badly signed, bad padding", badPadding(), badSignature, 401},
		{"badly signed, decrypts to no JSON", encrypted([]byte("not json"), webhookKey), badSignature, 401},
		{"badly signed event", encrypted(event, webhookKey), badSignature, 401},
		{"unsigned event", encrypted(event, webhookKey), noSignature, 401},
		{"unsigned, bad padding", badPadding(), noSignature, 401},
		{"unsigned challenge with a wrong token", encrypted(map[string]any{"type": "url_verification", "token": "nope", "challenge": "c-1"}, webhookKey), noSignature, 401},
		{"signed challenge with a wrong token", encrypted(map[string]any{"type": "url_verification", "token": "nope", "challenge": "c-2"}, webhookKey), validSignature, 401},
		{"unsigned challenge", encrypted(challenge, webhookKey), noSignature, 200},
		{"badly signed challenge", encrypted(challenge, webhookKey), badSignature, 200},
		{"signed challenge", encrypted(challenge, webhookKey), validSignature, 200},
	}
	refusals := map[string][]string{} // answer body: the cases answered with it
	for i, tt := range tests {
		code, body := postRaw(t, url, tt.body, tt.sig, fmt.Sprint("n-", i))
		if code != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, code, tt.want)
		}
		switch code {
		case 401:
			refusals[body] = append(refusals[body], tt.name)
		case 200:
			var answer struct{ Challenge string }
			if err := json.Unmarshal([]byte(body), &answer); err != nil || answer.Challenge != "c-9" {
				t.Errorf("%s: answer %q, want the challenge c-9", tt.name, body)
			}
		}
	}
	if len(refusals) != 1 {
		t.Errorf("refusals answered %d ways, want one: %q", len(refusals), refusals)
	}
	waitWebhook(t, url, webhookKey, feishutest.Text("ev-last", "ou_ada", "oc_p2p", "p2p", "om_last", "sentinel"))
	if got := h.Worker.ContentsUntil(t, "sentinel", wait); len(got) != 2 || got[0] != "warm-up" {
		t.Errorf("worker got %q, want only warm-up and sentinel", got)
	}
}

// TestWebhookRefusalsAreLoggedThrottled: anyone can post to the webhook,
// and each refusal was a log line (2,000 forged requests wrote 2,000
// lines); now at most one line goes out per observe.ThrottleEvery,
// saying how many it stands for.
func TestWebhookRefusalsAreLoggedThrottled(t *testing.T) {
	h, url := startWebhook(t, feishutest.Text("ev-0", "ou_ada", "oc_p2p", "p2p", "om_0", "warm-up"))
	const forged = 200
	body := encrypted(feishutest.Text("ev-f", "ou_ada", "oc_p2p", "p2p", "om_f", "forged"), webhookKey)
	for i := range forged {
		if code, _ := postRaw(t, url, body, badSignature, fmt.Sprint("f-", i)); code != 401 {
			t.Fatalf("forged request %d: %d, want 401", i, code)
		}
	}
	if n := h.logs.Count("without a valid signature"); n < 1 || n >= 10 {
		t.Errorf("%d forged requests logged %d lines, want at least one and far fewer than the requests", forged, n)
	}
}
