package kvstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.mau.fi/whatsmeow/util/keys"
)

type preKey struct {
	Priv     []byte `json:"priv"`
	Uploaded bool   `json:"uploaded"`
}

// nextPreKeyID is one more than the highest id ever generated (0 for
// none); the caller holds s.mu.
func (s *Store) nextPreKeyID(ctx context.Context) (uint32, error) {
	var n uint32
	if _, err := s.c.get(ctx, s.c.key("prekey-next"), &n); err != nil {
		return 0, err
	}
	return max(n, 1), nil
}

func (s *Store) genPreKeys(ctx context.Context, n int, uploaded bool) ([]*keys.PreKey, error) {
	next, err := s.nextPreKeyID(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*keys.PreKey, 0, n)
	for range n {
		k := keys.NewPreKey(next)
		if err := s.c.put(ctx, s.c.account+".prekey."+u32(next), preKey{Priv: k.Priv[:], Uploaded: uploaded}); err != nil {
			return nil, err
		}
		out = append(out, k)
		next++
	}
	if err := s.c.put(ctx, s.c.key("prekey-next"), next); err != nil {
		return nil, err
	}
	return out, nil
}

// GetOrGenPreKeys returns count pre-keys not yet uploaded, generating
// those missing.
func (s *Store) GetOrGenPreKeys(ctx context.Context, count uint32) ([]*keys.PreKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids, err := s.preKeyIDs(ctx)
	if err != nil {
		return nil, err
	}
	var out []*keys.PreKey
	for _, id := range ids {
		if uint32(len(out)) == count {
			break
		}
		k := s.c.account + ".prekey." + u32(id)
		var pk preKey
		found, err := s.c.get(ctx, k, &pk)
		if err != nil {
			return nil, err
		}
		if found && !pk.Uploaded && len(pk.Priv) == 32 {
			out = append(out, &keys.PreKey{KeyPair: *keys.NewKeyPairFromPrivateKey([32]byte(pk.Priv)), KeyID: id})
		}
	}
	more, err := s.genPreKeys(ctx, int(count)-len(out), false)
	if err != nil {
		return nil, fmt.Errorf("kvstore: generate pre-keys: %w", err)
	}
	return append(out, more...), nil
}

// preKeyIDs lists the stored pre-key ids in ascending order, the order
// in which whatsmeow's SQL store hands out keys not yet uploaded.
func (s *Store) preKeyIDs(ctx context.Context) ([]uint32, error) {
	ks, err := s.c.keys(ctx, s.c.account+".prekey.*")
	if err != nil {
		return nil, err
	}
	ids := make([]uint32, 0, len(ks))
	for _, k := range ks {
		if id, err := strconv.ParseUint(k[strings.LastIndexByte(k, '.')+1:], 10, 32); err == nil {
			ids = append(ids, uint32(id))
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

func (s *Store) GenOnePreKey(ctx context.Context) (*keys.PreKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks, err := s.genPreKeys(ctx, 1, true)
	if err != nil {
		return nil, err
	}
	return ks[0], nil
}

func (s *Store) GetPreKey(ctx context.Context, id uint32) (*keys.PreKey, error) {
	var pk preKey
	found, err := s.c.get(ctx, s.c.account+".prekey."+u32(id), &pk)
	if err != nil || !found {
		return nil, err
	}
	if len(pk.Priv) != 32 {
		return nil, fmt.Errorf("kvstore: pre-key %d has a key of %d bytes", id, len(pk.Priv))
	}
	return &keys.PreKey{KeyPair: *keys.NewKeyPairFromPrivateKey([32]byte(pk.Priv)), KeyID: id}, nil
}

func (s *Store) RemovePreKey(ctx context.Context, id uint32) error {
	return s.c.del(ctx, s.c.account+".prekey."+u32(id))
}

func (s *Store) MarkPreKeysAsUploaded(ctx context.Context, upToID uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eachPreKey(ctx, func(k string, id uint32, pk preKey) error {
		if id > upToID || pk.Uploaded {
			return nil
		}
		pk.Uploaded = true
		return s.c.put(ctx, k, pk)
	})
}

func (s *Store) UploadedPreKeyCount(ctx context.Context) (int, error) {
	n := 0
	err := s.eachPreKey(ctx, func(_ string, _ uint32, pk preKey) error {
		if pk.Uploaded {
			n++
		}
		return nil
	})
	return n, err
}

func (s *Store) eachPreKey(ctx context.Context, f func(key string, id uint32, pk preKey) error) error {
	ks, err := s.c.keys(ctx, s.c.account+".prekey.*")
	if err != nil {
		return err
	}
	for _, k := range ks {
		id, err := strconv.ParseUint(k[strings.LastIndexByte(k, '.')+1:], 10, 32)
		if err != nil {
			continue
		}
		var pk preKey
		found, err := s.c.get(ctx, k, &pk)
		if err != nil {
			return err
		}
		if found {
			if err := f(k, uint32(id), pk); err != nil {
				return err
			}
		}
	}
	return nil
}
