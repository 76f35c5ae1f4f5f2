package feishu

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	larkevent "github.com/larksuite/oapi-sdk-go/v3/event"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/subject"
)

// WebhookHandler receives events the platform posts in webhook mode.
// An event must carry a valid signature (X-Lark-Signature: SHA-256 over
// the timestamp, nonce, encrypt key and raw body), checked before the
// body is decrypted; a signed one replayed (a timestamp outside
// [ReplayWindow], a nonce already handled) is refused too. The URL
// challenge, which the platform does not sign, is the one request taken
// without a valid signature, and only when it decrypts to
// url_verification with the app's verification token. Every refusal is the
// same 401 without detail, whatever failed (signature, decryption, JSON,
// token, replay), so that no answer tells whether a forged body decrypted:
// a padding oracle. Malformed events that are signed are logged and
// acknowledged, so they are not sent again; an event that could not be
// stored gets a 500, so it is.
func (a *Adapter) WebhookHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		ctx, in, raw, ok := a.hook.Accept(w, r)
		if !ok {
			return
		}
		if !a.signed(r.Header, raw) {
			// Feishu's signature check leaves out the URL challenge: an
			// unsigned request may be that, and nothing else.
			plain, err := a.decrypt(raw)
			if err != nil {
				a.refuse(w, r, "Feishu webhook request without a valid signature", "err", err)
				return
			}
			c, ok := urlChallenge(plain)
			if !ok {
				a.refuse(w, r, "Feishu webhook request without a valid signature is no URL challenge")
				return
			}
			a.answerChallenge(w, r, c)
			return
		}
		plain, err := a.decrypt(raw)
		if err != nil {
			a.refuse(w, r, "signed Feishu webhook request that does not decrypt", "err", err)
			return
		}
		if c, ok := urlChallenge(plain); ok {
			a.answerChallenge(w, r, c)
			return
		}
		nonce, err := a.fresh(r.Context(), r.Header)
		switch {
		case errors.Is(err, errReplay):
			a.refuse(w, r, "Feishu webhook request refused as a replay", "err", err)
			return
		case err != nil: // the nonces could not be read: let the platform try again
			a.log.Error("feishu webhook request not checked; the platform will send it again", "err", err)
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		if err := a.handleEvent(ctx, in, plain); err != nil {
			a.log.Error("feishu event not stored; the platform will send it again", "err", err)
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		// Remembered only once handled: a request answered 500 may come
		// again as it was, and its event id keeps it from being stored
		// twice.
		if _, err := a.nonces.Create(r.Context(), nonce, nil); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			a.log.Warn("feishu webhook nonce not remembered", "err", err)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"msg":"success"}`))
	})
}

// signed reports whether the request carries the platform's signature
// of raw, compared in constant time.
func (a *Adapter) signed(h http.Header, raw []byte) bool {
	got := h.Get("X-Lark-Signature")
	if got == "" {
		return false
	}
	want := larkevent.Signature(h.Get("X-Lark-Request-Timestamp"), h.Get("X-Lark-Request-Nonce"), a.cfg.EncryptKey, string(raw))
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// challenge is the platform's URL challenge.
type challenge struct {
	Type      string `json:"type"`
	Token     string `json:"token"`
	Challenge string `json:"challenge"`
}

// urlChallenge reads plain as the URL challenge; false if it is none.
func urlChallenge(plain []byte) (challenge, bool) {
	var c challenge
	if json.Unmarshal(plain, &c) != nil || c.Type != "url_verification" {
		return challenge{}, false
	}
	return c, true
}

// answerChallenge echoes the challenge if it carries the app's
// verification token, and refuses it if not.
func (a *Adapter) answerChallenge(w http.ResponseWriter, r *http.Request, c challenge) {
	if subtle.ConstantTimeCompare([]byte(c.Token), []byte(a.cfg.VerificationToken)) != 1 {
		a.refuse(w, r, "Feishu URL challenge with a wrong verification token")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"challenge": c.Challenge})
}

// refuse logs why a webhook request is refused (throttled: anyone can
// send them) and answers it as every refusal is answered (see
// WebhookHandler).
func (a *Adapter) refuse(w http.ResponseWriter, r *http.Request, why string, args ...any) {
	a.refused.Warn(why, append(args, "remote", r.RemoteAddr)...)
	http.Error(w, "unauthorized", http.StatusUnauthorized)
}

// ReplayWindow is how far a signed webhook request's timestamp may be
// from the gateway's clock, as Slack's request signing allows; the nonces
// of handled requests are remembered fleet-wide for twice as long, so a
// request replayed inside the window is refused too.
const ReplayWindow = 5 * time.Minute

// bucketNonces is the short name of the bucket of handled webhook nonces.
const bucketNonces = "feishu-nonces"

// Assets declares the bucket of handled webhook nonces for
// [bus.Provision].
func Assets(sp subject.Space, l bus.Layout) bus.Assets {
	return bus.KeyValue(jetstream.KeyValueConfig{
		Bucket: bucketNonces, TTL: 2 * ReplayWindow,
		Description: "nonces of handled Feishu webhook requests, refused if replayed",
	})(sp, l)
}

// errReplay marks a webhook request refused as a possible replay.
var errReplay = errors.New("feishu: webhook replay")

// fresh checks a signed request's X-Lark-Request-Timestamp against
// [ReplayWindow] and its nonce against those already handled, and returns
// the key to remember the nonce by.
func (a *Adapter) fresh(ctx context.Context, h http.Header) (string, error) {
	ts, nonce := h.Get("X-Lark-Request-Timestamp"), h.Get("X-Lark-Request-Nonce")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || nonce == "" {
		return "", fmt.Errorf("%w: timestamp %q, nonce %q", errReplay, ts, nonce)
	}
	if skew := time.Since(time.Unix(sec, 0)); skew > ReplayWindow || skew < -ReplayWindow {
		return "", fmt.Errorf("%w: timestamp %s is %s from now, outside %s", errReplay, ts, skew.Round(time.Second), ReplayWindow)
	}
	sum := sha256.Sum256([]byte(ts + "\x00" + nonce))
	key := base64.RawURLEncoding.EncodeToString(sum[:16]) // characters a KV key may hold
	if _, err := bus.Get(ctx, a.nonces, key); err == nil {
		return "", fmt.Errorf("%w: nonce %q already handled", errReplay, nonce)
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", fmt.Errorf("feishu: nonce lookup: %w", err)
	}
	return key, nil
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
