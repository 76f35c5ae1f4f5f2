package kvstore

import (
	"context"
	"fmt"
	"strings"

	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
)

// LID mappings, shared by the bucket's accounts: lid.l.<lid user> holds
// the phone number user, lid.p.<pn user> the LID user.

// MigratePNToLID moves the sessions, identities and sender keys kept
// under a phone number's Signal address to its LID's, as whatsmeow's SQL
// store does when it learns the mapping.
func (s *Store) MigratePNToLID(ctx context.Context, pn, lid types.JID) error {
	from, to := pn.SignalAddressUser(), lid.SignalAddressUser()
	for _, kind := range []string{"sess", "ident"} {
		if err := s.move(ctx, s.c.key(kind, from)+".*", func(k string) string {
			return s.c.key(kind, to) + k[strings.LastIndexByte(k, '.'):]
		}); err != nil {
			return err
		}
	}
	// Sender keys: <account>.skey.<group>.<user>.<device>.
	return s.move(ctx, s.c.account+".skey.*."+enc(from)+".*", func(k string) string {
		parts := strings.Split(k, ".")
		parts[3] = enc(to)
		return strings.Join(parts, ".")
	})
}

func (s *Store) PutManyLIDMappings(ctx context.Context, mappings []store.LIDMapping) error {
	for _, m := range mappings {
		if err := s.PutLIDMapping(ctx, m.LID, m.PN); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) PutLIDMapping(ctx context.Context, lid, pn types.JID) error {
	if lid.Server != types.HiddenUserServer || pn.Server != types.DefaultUserServer {
		return fmt.Errorf("kvstore: invalid LID mapping %s → %s", lid, pn)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// A phone number that had another LID loses that mapping.
	if old, found, err := s.c.getRaw(ctx, lidPrefix+".p."+enc(pn.User)); err != nil {
		return err
	} else if found && string(old) != lid.User {
		if err := s.c.del(ctx, lidPrefix+".l."+enc(string(old))); err != nil {
			return err
		}
	}
	if err := s.c.putRaw(ctx, lidPrefix+".l."+enc(lid.User), []byte(pn.User)); err != nil {
		return err
	}
	return s.c.putRaw(ctx, lidPrefix+".p."+enc(pn.User), []byte(lid.User))
}

func (s *Store) GetPNForLID(ctx context.Context, lid types.JID) (types.JID, error) {
	if lid.Server != types.HiddenUserServer {
		return types.EmptyJID, fmt.Errorf("kvstore: GetPNForLID of non-LID %s", lid)
	}
	user, found, err := s.c.getRaw(ctx, lidPrefix+".l."+enc(lid.User))
	if err != nil || !found {
		return types.EmptyJID, err
	}
	return types.JID{User: string(user), Device: lid.Device, Server: types.DefaultUserServer}, nil
}

func (s *Store) GetLIDForPN(ctx context.Context, pn types.JID) (types.JID, error) {
	if pn.Server != types.DefaultUserServer {
		return types.EmptyJID, fmt.Errorf("kvstore: GetLIDForPN of non-phone %s", pn)
	}
	user, found, err := s.c.getRaw(ctx, lidPrefix+".p."+enc(pn.User))
	if err != nil || !found {
		return types.EmptyJID, err
	}
	return types.JID{User: string(user), Device: pn.Device, Server: types.HiddenUserServer}, nil
}

func (s *Store) GetManyLIDsForPNs(ctx context.Context, pns []types.JID) (map[types.JID]types.JID, error) {
	out := make(map[types.JID]types.JID, len(pns))
	for _, pn := range pns {
		if pn.Server != types.DefaultUserServer {
			continue
		}
		lid, err := s.GetLIDForPN(ctx, pn)
		if err != nil {
			return nil, err
		}
		if !lid.IsEmpty() {
			out[pn] = lid
		}
	}
	return out, nil
}
