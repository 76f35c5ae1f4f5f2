package kvstore

import (
	"bytes"
	"context"
	"strings"
	"sync"

	"go.mau.fi/whatsmeow/store"
)

// Store is one account's per-device stores and the bucket's LID map.
type Store struct {
	c  *Container
	mu sync.Mutex // serialises read-modify-write steps
}

var _ store.AllStores = (*Store)(nil)

// splitAddress splits a Signal address "user:device" (user may carry an
// "_agent" suffix) at its last colon.
func splitAddress(address string) (user, device string) {
	i := strings.LastIndexByte(address, ':')
	if i < 0 {
		return address, ""
	}
	return address[:i], address[i+1:]
}

func (s *Store) addrKey(kind, address string) string {
	user, device := splitAddress(address)
	return s.c.key(kind, user, device)
}

// Identities.

func (s *Store) PutIdentity(ctx context.Context, address string, key [32]byte) error {
	return s.c.putRaw(ctx, s.addrKey("ident", address), key[:])
}

func (s *Store) DeleteAllIdentities(ctx context.Context, phone string) error {
	return s.c.deleteMatching(ctx, s.c.key("ident", phone)+".*")
}

func (s *Store) DeleteIdentity(ctx context.Context, address string) error {
	return s.c.del(ctx, s.addrKey("ident", address))
}

// IsTrustedIdentity trusts a key on first use and while it is unchanged,
// as whatsmeow's SQL store does.
func (s *Store) IsTrustedIdentity(ctx context.Context, address string, key [32]byte) (bool, error) {
	got, found, err := s.c.getRaw(ctx, s.addrKey("ident", address))
	if err != nil || !found {
		return err == nil, err
	}
	return bytes.Equal(got, key[:]), nil
}

// Sessions.

func (s *Store) GetSession(ctx context.Context, address string) ([]byte, error) {
	data, _, err := s.c.getRaw(ctx, s.addrKey("sess", address))
	return data, err
}

func (s *Store) HasSession(ctx context.Context, address string) (bool, error) {
	_, found, err := s.c.getRaw(ctx, s.addrKey("sess", address))
	return found, err
}

func (s *Store) GetManySessions(ctx context.Context, addresses []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(addresses))
	for _, a := range addresses {
		data, _, err := s.c.getRaw(ctx, s.addrKey("sess", a))
		if err != nil {
			return nil, err
		}
		out[a] = data
	}
	return out, nil
}

func (s *Store) PutSession(ctx context.Context, address string, session []byte) error {
	return s.c.putRaw(ctx, s.addrKey("sess", address), session)
}

func (s *Store) PutManySessions(ctx context.Context, sessions map[string][]byte) error {
	for a, data := range sessions {
		if err := s.PutSession(ctx, a, data); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) DeleteAllSessions(ctx context.Context, phone string) error {
	return s.c.deleteMatching(ctx, s.c.key("sess", phone)+".*")
}

func (s *Store) DeleteSession(ctx context.Context, address string) error {
	return s.c.del(ctx, s.addrKey("sess", address))
}

// move renames the keys matching filter with rename, keeping values.
func (s *Store) move(ctx context.Context, filter string, rename func(string) string) error {
	ks, err := s.c.keys(ctx, filter)
	if err != nil {
		return err
	}
	for _, k := range ks {
		data, found, err := s.c.getRaw(ctx, k)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		if err := s.c.putRaw(ctx, rename(k), data); err != nil {
			return err
		}
		if err := s.c.del(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// Sender keys.

func (s *Store) PutSenderKey(ctx context.Context, group, user string, session []byte) error {
	u, d := splitAddress(user)
	return s.c.putRaw(ctx, s.c.key("skey", group, u, d), session)
}

func (s *Store) GetSenderKey(ctx context.Context, group, user string) ([]byte, error) {
	u, d := splitAddress(user)
	data, _, err := s.c.getRaw(ctx, s.c.key("skey", group, u, d))
	return data, err
}
