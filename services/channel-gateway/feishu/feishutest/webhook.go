package feishutest

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// Webhook posts event to a webhook URL as the platform does in webhook
// mode: encrypted with encryptKey and signed with it (sign=false sends a
// wrong signature). It returns the HTTP status.
func Webhook(t testing.TB, url, encryptKey string, event map[string]any, sign bool) int {
	t.Helper()
	return WebhookAt(t, url, encryptKey, event, sign, time.Now(), rand.Text()[:8])
}

// WebhookAt is [Webhook] with the request's timestamp and nonce given, to
// send a request as it was signed earlier (a replay).
func WebhookAt(t testing.TB, url, encryptKey string, event map[string]any, sign bool, at time.Time, nonce string) int {
	t.Helper()
	plain, _ := json.Marshal(event)
	body, _ := json.Marshal(map[string]string{"encrypt": Encrypt(plain, encryptKey)})
	ts := strconv.FormatInt(at.Unix(), 10)
	sig := Signature(ts, nonce, encryptKey, body)
	if !sign {
		sig = Signature(ts, nonce, "another key", body)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Lark-Request-Timestamp", ts)
	req.Header.Set("X-Lark-Request-Nonce", nonce)
	req.Header.Set("X-Lark-Signature", sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("feishutest: webhook: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Signature is the platform's request signature: hex SHA-256 of
// timestamp, nonce, encrypt key and body.
func Signature(ts, nonce, encryptKey string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(ts + nonce + encryptKey))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// Encrypt encrypts an event body as the platform does: AES-256-CBC with
// the SHA-256 of the encrypt key, a random IV in front, PKCS#7 padding,
// base64.
func Encrypt(plain []byte, encryptKey string) string {
	key := sha256.Sum256([]byte(encryptKey))
	block, _ := aes.NewCipher(key[:])
	pad := aes.BlockSize - len(plain)%aes.BlockSize
	plain = append(plain, bytes.Repeat([]byte{byte(pad)}, pad)...)
	out := make([]byte, aes.BlockSize+len(plain))
	_, _ = rand.Read(out[:aes.BlockSize])
	cipher.NewCBCEncrypter(block, out[:aes.BlockSize]).CryptBlocks(out[aes.BlockSize:], plain)
	return base64.StdEncoding.EncodeToString(out)
}
