package kvstore

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
)

// bufferKept is how long WhatsApp's servers buffer events, so how long a
// hash is worth keeping.
const bufferKept = 14 * 24 * time.Hour

type secret struct {
	Secret []byte `json:"secret"`
	Sender string `json:"sender"`
}

func (s *Store) PutMessageSecrets(ctx context.Context, inserts []store.MessageSecretInsert) error {
	for _, in := range inserts {
		if err := s.PutMessageSecret(ctx, in.Chat, in.Sender, in.ID, in.Secret); err != nil {
			return err
		}
	}
	return nil
}

// PutMessageSecret keeps the first secret stored for a message, as the
// SQL store does.
func (s *Store) PutMessageSecret(ctx context.Context, chat, sender types.JID, id types.MessageID, sec []byte) error {
	key := s.c.key("secret", chat.ToNonAD().String(), sender.ToNonAD().String(), id)
	data, err := jsonOf(secret{sec, sender.ToNonAD().String()})
	if err != nil {
		return err
	}
	if _, err := s.c.kv.Create(ctx, key, data); err != nil && !isExists(err) {
		return fmt.Errorf("kvstore: put %s: %w", key, err)
	}
	return nil
}

func (s *Store) GetMessageSecret(ctx context.Context, chat, sender types.JID, id types.MessageID) ([]byte, types.JID, error) {
	var sec secret
	found, err := s.c.get(ctx, s.c.key("secret", chat.ToNonAD().String(), sender.ToNonAD().String(), id), &sec)
	if err != nil || !found {
		return nil, types.EmptyJID, err
	}
	real, _ := types.ParseJID(sec.Sender) // written from a JID
	return sec.Secret, real, nil
}

func (s *Store) PutPrivacyTokens(ctx context.Context, tokens ...store.PrivacyToken) error {
	for _, t := range tokens {
		if err := s.c.put(ctx, s.c.key("ptoken", t.User.ToNonAD().String()), t); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) GetPrivacyToken(ctx context.Context, user types.JID) (*store.PrivacyToken, error) {
	var t store.PrivacyToken
	found, err := s.c.get(ctx, s.c.key("ptoken", user.ToNonAD().String()), &t)
	if err != nil || !found {
		return nil, err
	}
	return &t, nil
}

func (s *Store) bufKey(hash [32]byte) string {
	return s.c.account + ".evbuf." + hex.EncodeToString(hash[:])
}

func (s *Store) GetBufferedEvent(ctx context.Context, hash [32]byte) (*store.BufferedEvent, error) {
	var e store.BufferedEvent
	found, err := s.c.get(ctx, s.bufKey(hash), &e)
	if err != nil || !found {
		return nil, err
	}
	return &e, nil
}

func (s *Store) PutBufferedEvent(ctx context.Context, hash [32]byte, plaintext []byte, serverTime time.Time) error {
	return s.c.put(ctx, s.bufKey(hash), store.BufferedEvent{Plaintext: plaintext, InsertTime: time.Now(), ServerTime: serverTime})
}

// DoDecryptionTxn runs fn: a KV has no transactions (see the package
// comment).
func (s *Store) DoDecryptionTxn(ctx context.Context, fn func(context.Context) error) error {
	return fn(ctx)
}

// ClearBufferedEventPlaintext keeps the hash (so a repeat is recognised)
// and drops the plaintext.
func (s *Store) ClearBufferedEventPlaintext(ctx context.Context, hash [32]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.GetBufferedEvent(ctx, hash)
	if err != nil || e == nil {
		return err
	}
	e.Plaintext = nil
	return s.c.put(ctx, s.bufKey(hash), e)
}

func (s *Store) DeleteOldBufferedHashes(ctx context.Context) error {
	ks, err := s.c.keys(ctx, s.c.account+".evbuf.*")
	if err != nil {
		return err
	}
	cutoff := time.Now().Add(-bufferKept)
	for _, k := range ks {
		var e store.BufferedEvent
		found, err := s.c.get(ctx, k, &e)
		if err != nil {
			return err
		}
		if found && e.InsertTime.Before(cutoff) {
			if err := s.c.del(ctx, k); err != nil {
				return err
			}
		}
	}
	return nil
}
