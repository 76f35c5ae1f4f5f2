package feishu

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	larkevent "github.com/larksuite/oapi-sdk-go/v3/event"
)

// WebhookHandler receives events the platform posts in webhook mode.
// Every request must carry a valid signature (X-Lark-Signature over the
// timestamp, nonce, encrypt key and body); others are refused with 401.
// The URL challenge is answered when its verification token matches.
// Malformed events are logged and acknowledged, so they are not sent
// again; an event that could not be stored gets a 500, so it is.
func (a *Adapter) WebhookHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		a.mu.Lock()
		in, ctx := a.inbox, a.run
		a.mu.Unlock()
		if in == nil || ctx.Err() != nil {
			http.Error(w, "not running", http.StatusServiceUnavailable)
			return
		}
		raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read error", http.StatusBadRequest)
			return
		}
		req := &larkevent.EventReq{Header: r.Header, Body: raw, RequestURI: r.RequestURI}
		plain, err := a.decrypt(raw)
		if err != nil {
			a.log.Warn("dropping undecryptable Feishu webhook request", "err", err, "remote", r.RemoteAddr)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		var probe struct {
			Type      string `json:"type"`
			Token     string `json:"token"`
			Challenge string `json:"challenge"`
		}
		_ = json.Unmarshal(plain, &probe)
		if probe.Type == "url_verification" {
			// The challenge is not signed; its token proves it.
			if probe.Token != a.cfg.VerificationToken {
				a.log.Warn("Feishu URL challenge with a wrong verification token", "remote", r.RemoteAddr)
				http.Error(w, "forbidden", http.StatusUnauthorized)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"challenge": probe.Challenge})
			return
		}
		if err := a.events.VerifySign(r.Context(), req); err != nil {
			a.log.Warn("Feishu webhook request with a bad signature", "remote", r.RemoteAddr)
			http.Error(w, "forbidden", http.StatusUnauthorized)
			return
		}
		if err := a.handleEvent(ctx, in, plain); err != nil {
			a.log.Error("feishu event not stored; the platform will send it again", "err", err)
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"msg":"success"}`))
	})
}

// decrypt returns the plain event JSON of a webhook request body:
// {"encrypt": base64(IV + AES-256-CBC(SHA-256(encrypt key), JSON))}. It
// is done here rather than by the SDK's EventDecrypt, which panics on
// some bodies encrypted with another key.
func (a *Adapter) decrypt(raw []byte) ([]byte, error) {
	var body struct {
		Encrypt string `json:"encrypt"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	if body.Encrypt == "" {
		return nil, errors.New("body: no encrypt field")
	}
	buf, err := base64.StdEncoding.DecodeString(body.Encrypt)
	if err != nil {
		return nil, fmt.Errorf("encrypt field: %w", err)
	}
	if len(buf) < 2*aes.BlockSize || len(buf)%aes.BlockSize != 0 {
		return nil, errors.New("encrypt field: not whole AES blocks")
	}
	key := sha256.Sum256([]byte(a.cfg.EncryptKey))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	plain := buf[aes.BlockSize:]
	cipher.NewCBCDecrypter(block, buf[:aes.BlockSize]).CryptBlocks(plain, plain)
	pad := int(plain[len(plain)-1])
	if pad < 1 || pad > aes.BlockSize || !bytes.Equal(plain[len(plain)-pad:], bytes.Repeat([]byte{byte(pad)}, pad)) {
		return nil, errors.New("encrypt field: bad padding (another encrypt key?)")
	}
	plain = plain[:len(plain)-pad]
	if !json.Valid(plain) {
		return nil, errors.New("encrypt field: not JSON (another encrypt key?)")
	}
	return plain, nil
}
