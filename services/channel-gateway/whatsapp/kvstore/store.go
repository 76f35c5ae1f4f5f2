package kvstore

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/util/keys"
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

// Pre-keys.

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

// App state sync keys.

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

// App state versions and mutation MACs.

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

// Contacts.

func (s *Store) contact(ctx context.Context, user types.JID) (types.ContactInfo, error) {
	var info types.ContactInfo
	_, err := s.c.get(ctx, s.c.key("contact", user.ToNonAD().String()), &info)
	return info, err
}

func (s *Store) updateContact(ctx context.Context, user types.JID, f func(*types.ContactInfo) bool) (bool, types.ContactInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info, err := s.contact(ctx, user)
	if err != nil {
		return false, info, err
	}
	old := info
	if !f(&info) {
		return false, old, nil
	}
	info.Found = true
	return true, old, s.c.put(ctx, s.c.key("contact", user.ToNonAD().String()), info)
}

func (s *Store) PutPushName(ctx context.Context, user types.JID, pushName string) (bool, string, error) {
	changed, old, err := s.updateContact(ctx, user, func(c *types.ContactInfo) bool {
		if c.PushName == pushName {
			return false
		}
		c.PushName = pushName
		return true
	})
	return changed, old.PushName, err
}

func (s *Store) PutBusinessName(ctx context.Context, user types.JID, businessName string) (bool, string, error) {
	changed, old, err := s.updateContact(ctx, user, func(c *types.ContactInfo) bool {
		if c.BusinessName == businessName {
			return false
		}
		c.BusinessName = businessName
		return true
	})
	return changed, old.BusinessName, err
}

func (s *Store) PutContactName(ctx context.Context, user types.JID, fullName, firstName string) error {
	_, _, err := s.updateContact(ctx, user, func(c *types.ContactInfo) bool {
		if c.FullName == fullName && c.FirstName == firstName {
			return false
		}
		c.FullName, c.FirstName = fullName, firstName
		return true
	})
	return err
}

func (s *Store) PutAllContactNames(ctx context.Context, contacts []store.ContactEntry) error {
	for _, e := range contacts {
		if err := s.PutContactName(ctx, e.JID, e.FullName, e.FirstName); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) PutManyRedactedPhones(ctx context.Context, entries []store.RedactedPhoneEntry) error {
	for _, e := range entries {
		if _, _, err := s.updateContact(ctx, e.JID, func(c *types.ContactInfo) bool {
			if c.RedactedPhone == e.RedactedPhone {
				return false
			}
			c.RedactedPhone = e.RedactedPhone
			return true
		}); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) GetContact(ctx context.Context, user types.JID) (types.ContactInfo, error) {
	return s.contact(ctx, user)
}

func (s *Store) GetAllContacts(ctx context.Context) (map[types.JID]types.ContactInfo, error) {
	ks, err := s.c.keys(ctx, s.c.account+".contact.*")
	if err != nil {
		return nil, err
	}
	out := make(map[types.JID]types.ContactInfo, len(ks))
	for _, k := range ks {
		raw, err := dec(k[strings.LastIndexByte(k, '.')+1:])
		if err != nil {
			continue
		}
		jid, err := types.ParseJID(raw)
		if err != nil {
			continue
		}
		var info types.ContactInfo
		found, err := s.c.get(ctx, k, &info)
		if err != nil {
			return nil, err
		}
		if found {
			out[jid] = info
		}
	}
	return out, nil
}

// Chat settings.

func (s *Store) updateChat(ctx context.Context, chat types.JID, f func(*types.LocalChatSettings)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs, err := s.GetChatSettings(ctx, chat)
	if err != nil {
		return err
	}
	f(&cs)
	cs.Found = true
	return s.c.put(ctx, s.c.key("chat", chat.ToNonAD().String()), cs)
}

func (s *Store) PutMutedUntil(ctx context.Context, chat types.JID, mutedUntil time.Time) error {
	return s.updateChat(ctx, chat, func(cs *types.LocalChatSettings) { cs.MutedUntil = mutedUntil })
}

func (s *Store) PutPinned(ctx context.Context, chat types.JID, pinned bool) error {
	return s.updateChat(ctx, chat, func(cs *types.LocalChatSettings) { cs.Pinned = pinned })
}

func (s *Store) PutArchived(ctx context.Context, chat types.JID, archived bool) error {
	return s.updateChat(ctx, chat, func(cs *types.LocalChatSettings) { cs.Archived = archived })
}

func (s *Store) GetChatSettings(ctx context.Context, chat types.JID) (types.LocalChatSettings, error) {
	var cs types.LocalChatSettings
	_, err := s.c.get(ctx, s.c.key("chat", chat.ToNonAD().String()), &cs)
	return cs, err
}

// Message secrets.

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

// Privacy tokens.

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

// Event buffer.

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

// bufferKept is how long WhatsApp's servers buffer events, so how long a
// hash is worth keeping.
const bufferKept = 14 * 24 * time.Hour

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

// LID mappings, shared by the bucket's accounts: lid.l.<lid user> holds
// the phone number user, lid.p.<pn user> the LID user.

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
