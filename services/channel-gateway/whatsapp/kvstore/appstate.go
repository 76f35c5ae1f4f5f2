package kvstore

import (
	"context"

	"go.mau.fi/whatsmeow/store"
)

type latestKey struct {
	ID        []byte `json:"id"`
	Timestamp int64  `json:"ts"`
}

func (s *Store) PutAppStateSyncKey(ctx context.Context, id []byte, key store.AppStateSyncKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.c.put(ctx, s.c.key("ask", string(id)), key); err != nil {
		return err
	}
	var latest latestKey
	found, err := s.c.get(ctx, s.c.key("ask-latest"), &latest)
	if err != nil {
		return err
	}
	if !found || key.Timestamp >= latest.Timestamp {
		return s.c.put(ctx, s.c.key("ask-latest"), latestKey{ID: id, Timestamp: key.Timestamp})
	}
	return nil
}

func (s *Store) GetAppStateSyncKey(ctx context.Context, id []byte) (*store.AppStateSyncKey, error) {
	var k store.AppStateSyncKey
	found, err := s.c.get(ctx, s.c.key("ask", string(id)), &k)
	if err != nil || !found {
		return nil, err
	}
	return &k, nil
}

func (s *Store) GetLatestAppStateSyncKeyID(ctx context.Context) ([]byte, error) {
	var latest latestKey
	_, err := s.c.get(ctx, s.c.key("ask-latest"), &latest)
	return latest.ID, err
}

type stateVersion struct {
	Version uint64 `json:"version"`
	Hash    []byte `json:"hash"`
}

func (s *Store) PutAppStateVersion(ctx context.Context, name string, version uint64, hash [128]byte) error {
	return s.c.put(ctx, s.c.key("asv", name), stateVersion{version, hash[:]})
}

func (s *Store) GetAppStateVersion(ctx context.Context, name string) (uint64, [128]byte, error) {
	var v stateVersion
	var hash [128]byte
	found, err := s.c.get(ctx, s.c.key("asv", name), &v)
	if err != nil || !found {
		return 0, hash, err
	}
	copy(hash[:], v.Hash)
	return v.Version, hash, nil
}

// DeleteAppStateVersion forgets a state's version and its MACs (the SQL
// store's foreign key cascades the same way).
func (s *Store) DeleteAppStateVersion(ctx context.Context, name string) error {
	if err := s.c.deleteMatching(ctx, s.c.key("mac", name)+".*"); err != nil {
		return err
	}
	return s.c.del(ctx, s.c.key("asv", name))
}

type mac struct {
	Version uint64 `json:"version"`
	Value   []byte `json:"value"`
}

func (s *Store) PutAppStateMutationMACs(ctx context.Context, name string, version uint64, mutations []store.AppStateMutationMAC) error {
	for _, m := range mutations {
		if err := s.c.put(ctx, s.c.key("mac", name, string(m.IndexMAC)), mac{version, m.ValueMAC}); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) DeleteAppStateMutationMACs(ctx context.Context, name string, indexMACs [][]byte) error {
	for _, im := range indexMACs {
		if err := s.c.del(ctx, s.c.key("mac", name, string(im))); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) GetAppStateMutationMAC(ctx context.Context, name string, indexMAC []byte) ([]byte, error) {
	var m mac
	_, err := s.c.get(ctx, s.c.key("mac", name, string(indexMAC)), &m)
	return m.Value, err
}
