package kvstore_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.mau.fi/whatsmeow/proto/waAdv"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/whatsapp/kvstore"
)

// open connects a new client to srv and opens the account's container.
func open(t *testing.T, srv *bustest.Server, account string) *kvstore.Container {
	t.Helper()
	b := srv.Connect(t, "nf")
	kv, err := b.JS.CreateOrUpdateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: b.Space.Bucket("whatsapp"), History: 1})
	if err != nil {
		t.Fatal(err)
	}
	c, err := kvstore.New(kv, account, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func storeOf(t *testing.T, c *kvstore.Container) *store.Device {
	t.Helper()
	d, err := c.Device(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var (
	alice    = types.NewJID("15550001", types.DefaultUserServer)
	aliceLID = types.NewJID("900001", types.HiddenUserServer)
	group    = types.NewJID("12036302", types.GroupServer)
	key1     = [32]byte{1, 2, 3}
	key2     = [32]byte{9, 9, 9}
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestStores puts through one connection, reads through another (the
// link survives a reconnect, as it does a gateway taking over), then
// deletes and checks the data is gone.
func TestStores(t *testing.T) {
	type step func(t *testing.T, ctx context.Context, d *store.Device)
	tests := []struct {
		name            string
		put, check, del step
		gone            step
	}{
		{
			name: "identity",
			put: func(t *testing.T, ctx context.Context, d *store.Device) {
				must(t, d.Identities.PutIdentity(ctx, "15550001:3", key1))
				must(t, d.Identities.PutIdentity(ctx, "15550001:4", key1))
				must(t, d.Identities.PutIdentity(ctx, "15550002:1", key1))
			},
			check: func(t *testing.T, ctx context.Context, d *store.Device) {
				for _, tc := range []struct {
					addr string
					key  [32]byte
					want bool
				}{{"15550001:3", key1, true}, {"15550001:3", key2, false}, {"15559999:1", key2, true}} {
					if ok, err := d.Identities.IsTrustedIdentity(ctx, tc.addr, tc.key); err != nil || ok != tc.want {
						t.Errorf("IsTrustedIdentity(%s, %v) = %v, %v", tc.addr, tc.key[0], ok, err)
					}
				}
			},
			del: func(t *testing.T, ctx context.Context, d *store.Device) {
				must(t, d.Identities.DeleteIdentity(ctx, "15550002:1"))
				must(t, d.Identities.DeleteAllIdentities(ctx, "15550001"))
			},
			gone: func(t *testing.T, ctx context.Context, d *store.Device) {
				for _, a := range []string{"15550001:3", "15550001:4", "15550002:1"} {
					if ok, _ := d.Identities.IsTrustedIdentity(ctx, a, key2); !ok {
						t.Errorf("%s still has a stored identity", a)
					}
				}
			},
		},
		{
			name: "sessions",
			put: func(t *testing.T, ctx context.Context, d *store.Device) {
				must(t, d.Sessions.PutSession(ctx, "15550001:1", []byte("s1")))
				must(t, d.Sessions.PutManySessions(ctx, map[string][]byte{"15550001:2": []byte("s2"), "15550001_1:0": []byte("s3")}))
			},
			check: func(t *testing.T, ctx context.Context, d *store.Device) {
				if s, err := d.Sessions.GetSession(ctx, "15550001:1"); err != nil || string(s) != "s1" {
					t.Errorf("GetSession = %q, %v", s, err)
				}
				if ok, err := d.Sessions.HasSession(ctx, "15550001:2"); err != nil || !ok {
					t.Errorf("HasSession = %v, %v", ok, err)
				}
				if ok, _ := d.Sessions.HasSession(ctx, "15550001:9"); ok {
					t.Error("HasSession of an unknown address")
				}
				m, err := d.Sessions.GetManySessions(ctx, []string{"15550001:2", "15550001_1:0", "nobody:1"})
				if err != nil || string(m["15550001:2"]) != "s2" || string(m["15550001_1:0"]) != "s3" || m["nobody:1"] != nil || len(m) != 3 {
					t.Errorf("GetManySessions = %q, %v", m, err)
				}
			},
			del: func(t *testing.T, ctx context.Context, d *store.Device) {
				must(t, d.Sessions.DeleteSession(ctx, "15550001_1:0"))
				must(t, d.Sessions.DeleteAllSessions(ctx, "15550001"))
			},
			gone: func(t *testing.T, ctx context.Context, d *store.Device) {
				for _, a := range []string{"15550001:1", "15550001:2", "15550001_1:0"} {
					if ok, err := d.Sessions.HasSession(ctx, a); ok || err != nil {
						t.Errorf("HasSession(%s) after delete = %v, %v", a, ok, err)
					}
				}
			},
		},
		{
			name: "migrate phone number to LID",
			put: func(t *testing.T, ctx context.Context, d *store.Device) {
				must(t, d.Sessions.PutSession(ctx, "15550001:1", []byte("pn-session")))
				must(t, d.Identities.PutIdentity(ctx, "15550001:1", key1))
				must(t, d.SenderKeys.PutSenderKey(ctx, group.String(), "15550001:1", []byte("pn-skey")))
				must(t, d.Sessions.MigratePNToLID(ctx, alice, aliceLID))
			},
			check: func(t *testing.T, ctx context.Context, d *store.Device) {
				lid := aliceLID.SignalAddressUser() + ":1"
				if s, _ := d.Sessions.GetSession(ctx, lid); string(s) != "pn-session" {
					t.Errorf("LID session = %q", s)
				}
				if ok, _ := d.Identities.IsTrustedIdentity(ctx, lid, key2); ok {
					t.Error("LID identity not moved")
				}
				if k, _ := d.SenderKeys.GetSenderKey(ctx, group.String(), lid); string(k) != "pn-skey" {
					t.Errorf("LID sender key = %q", k)
				}
				if ok, _ := d.Sessions.HasSession(ctx, "15550001:1"); ok {
					t.Error("phone number session kept")
				}
			},
			del:  func(t *testing.T, ctx context.Context, d *store.Device) {},
			gone: func(t *testing.T, ctx context.Context, d *store.Device) {},
		},
		{
			name: "pre-keys",
			put: func(t *testing.T, ctx context.Context, d *store.Device) {
				ks, err := d.PreKeys.GetOrGenPreKeys(ctx, 3)
				if err != nil || len(ks) != 3 || ks[0].KeyID != 1 || ks[2].KeyID != 3 {
					t.Fatalf("GetOrGenPreKeys = %v, %v", ks, err)
				}
				again, err := d.PreKeys.GetOrGenPreKeys(ctx, 2)
				if err != nil || len(again) != 2 || again[0].KeyID != 1 || *again[0].Priv != *ks[0].Priv {
					t.Fatalf("GetOrGenPreKeys again = %v, %v", again, err)
				}
				must(t, d.PreKeys.MarkPreKeysAsUploaded(ctx, 2))
				one, err := d.PreKeys.GenOnePreKey(ctx)
				if err != nil || one.KeyID != 4 {
					t.Fatalf("GenOnePreKey = %v, %v", one, err)
				}
			},
			check: func(t *testing.T, ctx context.Context, d *store.Device) {
				if n, err := d.PreKeys.UploadedPreKeyCount(ctx); err != nil || n != 3 {
					t.Errorf("UploadedPreKeyCount = %d, %v", n, err)
				}
				k, err := d.PreKeys.GetPreKey(ctx, 2)
				if err != nil || k == nil || k.KeyID != 2 {
					t.Errorf("GetPreKey = %v, %v", k, err)
				}
				ks, err := d.PreKeys.GetOrGenPreKeys(ctx, 2)
				if err != nil || len(ks) != 2 || ks[0].KeyID != 3 || ks[1].KeyID != 5 {
					t.Errorf("GetOrGenPreKeys after upload = %v, %v", ks, err)
				}
			},
			del: func(t *testing.T, ctx context.Context, d *store.Device) {
				must(t, d.PreKeys.RemovePreKey(ctx, 2))
			},
			gone: func(t *testing.T, ctx context.Context, d *store.Device) {
				if k, err := d.PreKeys.GetPreKey(ctx, 2); k != nil || err != nil {
					t.Errorf("GetPreKey after remove = %v, %v", k, err)
				}
			},
		},
		{
			name: "sender keys",
			put: func(t *testing.T, ctx context.Context, d *store.Device) {
				must(t, d.SenderKeys.PutSenderKey(ctx, group.String(), "15550002:0", []byte("sk")))
			},
			check: func(t *testing.T, ctx context.Context, d *store.Device) {
				if k, err := d.SenderKeys.GetSenderKey(ctx, group.String(), "15550002:0"); err != nil || string(k) != "sk" {
					t.Errorf("GetSenderKey = %q, %v", k, err)
				}
				if k, err := d.SenderKeys.GetSenderKey(ctx, "other@g.us", "15550002:0"); err != nil || k != nil {
					t.Errorf("GetSenderKey other group = %q, %v", k, err)
				}
			},
			del: func(t *testing.T, ctx context.Context, d *store.Device) {}, gone: func(t *testing.T, ctx context.Context, d *store.Device) {},
		},
		{
			name: "app state sync keys",
			put: func(t *testing.T, ctx context.Context, d *store.Device) {
				must(t, d.AppStateKeys.PutAppStateSyncKey(ctx, []byte{0, 1}, store.AppStateSyncKey{Data: []byte("new"), Fingerprint: []byte("f"), Timestamp: 20}))
				must(t, d.AppStateKeys.PutAppStateSyncKey(ctx, []byte{0, 2}, store.AppStateSyncKey{Data: []byte("old"), Timestamp: 10}))
			},
			check: func(t *testing.T, ctx context.Context, d *store.Device) {
				k, err := d.AppStateKeys.GetAppStateSyncKey(ctx, []byte{0, 1})
				if err != nil || k == nil || string(k.Data) != "new" || string(k.Fingerprint) != "f" || k.Timestamp != 20 {
					t.Errorf("GetAppStateSyncKey = %+v, %v", k, err)
				}
				if id, err := d.AppStateKeys.GetLatestAppStateSyncKeyID(ctx); err != nil || !bytes.Equal(id, []byte{0, 1}) {
					t.Errorf("GetLatestAppStateSyncKeyID = %v, %v", id, err)
				}
				if k, err := d.AppStateKeys.GetAppStateSyncKey(ctx, []byte{7}); k != nil || err != nil {
					t.Errorf("unknown key = %v, %v", k, err)
				}
			},
			del: func(t *testing.T, ctx context.Context, d *store.Device) {}, gone: func(t *testing.T, ctx context.Context, d *store.Device) {},
		},
		{
			name: "app state versions and MACs",
			put: func(t *testing.T, ctx context.Context, d *store.Device) {
				must(t, d.AppState.PutAppStateVersion(ctx, "regular", 7, [128]byte{5}))
				must(t, d.AppState.PutAppStateMutationMACs(ctx, "regular", 7, []store.AppStateMutationMAC{{IndexMAC: []byte("i1"), ValueMAC: []byte("v1")}, {IndexMAC: []byte("i2"), ValueMAC: []byte("v2")}}))
				must(t, d.AppState.PutAppStateMutationMACs(ctx, "regular", 8, []store.AppStateMutationMAC{{IndexMAC: []byte("i1"), ValueMAC: []byte("v1b")}}))
			},
			check: func(t *testing.T, ctx context.Context, d *store.Device) {
				if v, h, err := d.AppState.GetAppStateVersion(ctx, "regular"); err != nil || v != 7 || h[0] != 5 {
					t.Errorf("GetAppStateVersion = %d, %v, %v", v, h[0], err)
				}
				if m, err := d.AppState.GetAppStateMutationMAC(ctx, "regular", []byte("i1")); err != nil || string(m) != "v1b" {
					t.Errorf("GetAppStateMutationMAC = %q, %v", m, err)
				}
			},
			del: func(t *testing.T, ctx context.Context, d *store.Device) {
				must(t, d.AppState.DeleteAppStateMutationMACs(ctx, "regular", [][]byte{[]byte("i2")}))
				if m, _ := d.AppState.GetAppStateMutationMAC(ctx, "regular", []byte("i2")); m != nil {
					t.Errorf("deleted MAC = %q", m)
				}
				must(t, d.AppState.DeleteAppStateVersion(ctx, "regular"))
			},
			gone: func(t *testing.T, ctx context.Context, d *store.Device) {
				if v, _, err := d.AppState.GetAppStateVersion(ctx, "regular"); err != nil || v != 0 {
					t.Errorf("version after delete = %d, %v", v, err)
				}
				if m, _ := d.AppState.GetAppStateMutationMAC(ctx, "regular", []byte("i1")); m != nil {
					t.Errorf("MAC after version delete = %q", m)
				}
			},
		},
		{
			name: "contacts",
			put: func(t *testing.T, ctx context.Context, d *store.Device) {
				if changed, old, err := d.Contacts.PutPushName(ctx, alice, "Ali"); err != nil || !changed || old != "" {
					t.Errorf("PutPushName = %v, %q, %v", changed, old, err)
				}
				if changed, old, err := d.Contacts.PutPushName(ctx, alice, "Alice"); err != nil || !changed || old != "Ali" {
					t.Errorf("PutPushName again = %v, %q, %v", changed, old, err)
				}
				if changed, _, _ := d.Contacts.PutPushName(ctx, alice, "Alice"); changed {
					t.Error("PutPushName unchanged reported a change")
				}
				if changed, _, err := d.Contacts.PutBusinessName(ctx, alice, "Alice Ltd"); err != nil || !changed {
					t.Errorf("PutBusinessName = %v, %v", changed, err)
				}
				must(t, d.Contacts.PutContactName(ctx, alice, "Alice Liddell", "Alice"))
				must(t, d.Contacts.PutAllContactNames(ctx, []store.ContactEntry{{JID: types.NewJID("15550002", types.DefaultUserServer), FirstName: "Bob", FullName: "Bob B"}}))
				must(t, d.Contacts.PutManyRedactedPhones(ctx, []store.RedactedPhoneEntry{{JID: aliceLID, RedactedPhone: "+1∙∙∙01"}}))
			},
			check: func(t *testing.T, ctx context.Context, d *store.Device) {
				c, err := d.Contacts.GetContact(ctx, alice)
				want := types.ContactInfo{Found: true, FirstName: "Alice", FullName: "Alice Liddell", PushName: "Alice", BusinessName: "Alice Ltd"}
				if err != nil || c != want {
					t.Errorf("GetContact = %+v, %v", c, err)
				}
				all, err := d.Contacts.GetAllContacts(ctx)
				if err != nil || len(all) != 3 || all[types.NewJID("15550002", types.DefaultUserServer)].FullName != "Bob B" || all[aliceLID].RedactedPhone != "+1∙∙∙01" {
					t.Errorf("GetAllContacts = %+v, %v", all, err)
				}
				if c, _ := d.Contacts.GetContact(ctx, types.NewJID("1", types.DefaultUserServer)); c.Found {
					t.Error("unknown contact found")
				}
			},
			del: func(t *testing.T, ctx context.Context, d *store.Device) {}, gone: func(t *testing.T, ctx context.Context, d *store.Device) {},
		},
		{
			name: "chat settings",
			put: func(t *testing.T, ctx context.Context, d *store.Device) {
				must(t, d.ChatSettings.PutMutedUntil(ctx, group, store.MutedForever))
				must(t, d.ChatSettings.PutPinned(ctx, group, true))
				must(t, d.ChatSettings.PutArchived(ctx, group, true))
			},
			check: func(t *testing.T, ctx context.Context, d *store.Device) {
				cs, err := d.ChatSettings.GetChatSettings(ctx, group)
				if err != nil || !cs.Found || !cs.Pinned || !cs.Archived || !cs.MutedUntil.Equal(store.MutedForever) {
					t.Errorf("GetChatSettings = %+v, %v", cs, err)
				}
			},
			del: func(t *testing.T, ctx context.Context, d *store.Device) {
				must(t, d.ChatSettings.PutArchived(ctx, group, false))
			},
			gone: func(t *testing.T, ctx context.Context, d *store.Device) {
				if cs, _ := d.ChatSettings.GetChatSettings(ctx, group); cs.Archived || !cs.Pinned {
					t.Errorf("after unarchive = %+v", cs)
				}
			},
		},
		{
			name: "message secrets",
			put: func(t *testing.T, ctx context.Context, d *store.Device) {
				must(t, d.MsgSecrets.PutMessageSecret(ctx, group, alice, "m1", []byte("first")))
				must(t, d.MsgSecrets.PutMessageSecret(ctx, group, alice, "m1", []byte("second")))
				must(t, d.MsgSecrets.PutMessageSecrets(ctx, []store.MessageSecretInsert{{Chat: group, Sender: alice, ID: "m2", Secret: []byte("two")}}))
			},
			check: func(t *testing.T, ctx context.Context, d *store.Device) {
				sec, sender, err := d.MsgSecrets.GetMessageSecret(ctx, group, alice, "m1")
				if err != nil || string(sec) != "first" || sender != alice {
					t.Errorf("GetMessageSecret = %q, %s, %v", sec, sender, err)
				}
				if sec, _, _ := d.MsgSecrets.GetMessageSecret(ctx, group, alice, "m2"); string(sec) != "two" {
					t.Errorf("m2 secret = %q", sec)
				}
				if sec, _, err := d.MsgSecrets.GetMessageSecret(ctx, group, alice, "m3"); sec != nil || err != nil {
					t.Errorf("unknown secret = %q, %v", sec, err)
				}
			},
			del: func(t *testing.T, ctx context.Context, d *store.Device) {}, gone: func(t *testing.T, ctx context.Context, d *store.Device) {},
		},
		{
			name: "privacy tokens",
			put: func(t *testing.T, ctx context.Context, d *store.Device) {
				must(t, d.PrivacyTokens.PutPrivacyTokens(ctx, store.PrivacyToken{User: alice, Token: []byte("tok"), Timestamp: time.Unix(1700000000, 0)}))
			},
			check: func(t *testing.T, ctx context.Context, d *store.Device) {
				tok, err := d.PrivacyTokens.GetPrivacyToken(ctx, alice)
				if err != nil || tok == nil || string(tok.Token) != "tok" || tok.Timestamp.Unix() != 1700000000 || tok.User != alice {
					t.Errorf("GetPrivacyToken = %+v, %v", tok, err)
				}
				if tok, err := d.PrivacyTokens.GetPrivacyToken(ctx, aliceLID); tok != nil || err != nil {
					t.Errorf("unknown token = %+v, %v", tok, err)
				}
			},
			del: func(t *testing.T, ctx context.Context, d *store.Device) {}, gone: func(t *testing.T, ctx context.Context, d *store.Device) {},
		},
		{
			name: "event buffer",
			put: func(t *testing.T, ctx context.Context, d *store.Device) {
				must(t, d.EventBuffer.DoDecryptionTxn(ctx, func(ctx context.Context) error {
					return d.EventBuffer.PutBufferedEvent(ctx, [32]byte{1}, []byte("plain"), time.Unix(1700000000, 0))
				}))
			},
			check: func(t *testing.T, ctx context.Context, d *store.Device) {
				e, err := d.EventBuffer.GetBufferedEvent(ctx, [32]byte{1})
				if err != nil || e == nil || string(e.Plaintext) != "plain" || e.ServerTime.Unix() != 1700000000 {
					t.Errorf("GetBufferedEvent = %+v, %v", e, err)
				}
				must(t, d.EventBuffer.DeleteOldBufferedHashes(ctx)) // a fresh one stays
				if e, _ := d.EventBuffer.GetBufferedEvent(ctx, [32]byte{1}); e == nil {
					t.Error("fresh buffered event deleted")
				}
			},
			del: func(t *testing.T, ctx context.Context, d *store.Device) {
				must(t, d.EventBuffer.ClearBufferedEventPlaintext(ctx, [32]byte{1}))
			},
			gone: func(t *testing.T, ctx context.Context, d *store.Device) {
				if e, err := d.EventBuffer.GetBufferedEvent(ctx, [32]byte{1}); err != nil || e == nil || e.Plaintext != nil {
					t.Errorf("after clear = %+v, %v", e, err)
				}
			},
		},
		{
			name: "LID mappings",
			put: func(t *testing.T, ctx context.Context, d *store.Device) {
				must(t, d.LIDs.PutLIDMapping(ctx, types.NewJID("111", types.HiddenUserServer), alice))
				must(t, d.LIDs.PutManyLIDMappings(ctx, []store.LIDMapping{{LID: aliceLID, PN: alice}}))
				if err := d.LIDs.PutLIDMapping(ctx, alice, aliceLID); err == nil {
					t.Error("a mapping the wrong way round was stored")
				}
			},
			check: func(t *testing.T, ctx context.Context, d *store.Device) {
				if pn, err := d.LIDs.GetPNForLID(ctx, aliceLID); err != nil || pn != alice {
					t.Errorf("GetPNForLID = %s, %v", pn, err)
				}
				if pn, err := d.LIDs.GetPNForLID(ctx, types.NewJID("111", types.HiddenUserServer)); err != nil || !pn.IsEmpty() {
					t.Errorf("replaced mapping still answers %s, %v", pn, err)
				}
				withDevice := alice
				withDevice.Device = 3
				if lid, err := d.LIDs.GetLIDForPN(ctx, withDevice); err != nil || lid.User != aliceLID.User || lid.Device != 3 {
					t.Errorf("GetLIDForPN = %s, %v", lid, err)
				}
				m, err := d.LIDs.GetManyLIDsForPNs(ctx, []types.JID{alice, types.NewJID("1", types.DefaultUserServer)})
				if err != nil || len(m) != 1 || m[alice] != aliceLID {
					t.Errorf("GetManyLIDsForPNs = %v, %v", m, err)
				}
			},
			del: func(t *testing.T, ctx context.Context, d *store.Device) {}, gone: func(t *testing.T, ctx context.Context, d *store.Device) {},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := bustest.StartServer(t)
			ctx := t.Context()
			first := storeOf(t, open(t, srv, "acct"))
			tt.put(t, ctx, first)
			tt.check(t, ctx, first)
			second := storeOf(t, open(t, srv, "acct"))
			tt.check(t, ctx, second)
			tt.del(t, ctx, second)
			tt.gone(t, ctx, second)
			tt.gone(t, ctx, storeOf(t, open(t, srv, "acct")))
		})
	}
}

func TestDevice(t *testing.T) {
	srv := bustest.StartServer(t)
	ctx := t.Context()
	c := open(t, srv, "acct")
	d := storeOf(t, c)
	if d.ID != nil || d.NoiseKey == nil || d.SignedPreKey.Signature == nil || len(d.AdvSecretKey) != 32 {
		t.Fatalf("new device = %+v", d)
	}
	if err := d.Save(ctx); !errors.Is(err, kvstore.ErrNoID) {
		t.Errorf("saving an unlinked device: %v", err)
	}
	if id, err := c.Linked(ctx); id != "" || err != nil {
		t.Errorf("Linked before linking = %q, %v", id, err)
	}
	id := types.NewADJID("15550009", 0, 12)
	d.ID, d.LID, d.PushName, d.Platform = &id, types.NewJID("900009", types.HiddenUserServer), "Fleet", "android"
	d.Account = &waAdv.ADVSignedDeviceIdentity{Details: []byte("details"), AccountSignature: []byte("sig")}
	must(t, d.Save(ctx))
	must(t, d.Sessions.PutSession(ctx, "15550001:1", []byte("s")))

	other := open(t, srv, "other")
	if o := storeOf(t, other); o.ID != nil {
		t.Errorf("another account sees device %s", o.ID)
	}
	back := storeOf(t, open(t, srv, "acct"))
	if back.ID == nil || *back.ID != id || back.LID != d.LID || back.PushName != "Fleet" || back.Platform != "android" ||
		*back.NoiseKey.Priv != *d.NoiseKey.Priv || *back.IdentityKey.Pub != *d.IdentityKey.Pub ||
		*back.SignedPreKey.Signature != *d.SignedPreKey.Signature || back.RegistrationID != d.RegistrationID ||
		string(back.Account.Details) != "details" || string(back.Account.AccountSignature) != "sig" {
		t.Errorf("reloaded device differs: %+v", back)
	}
	if got, err := c.Linked(ctx); got != id.String() || err != nil {
		t.Errorf("Linked = %q, %v", got, err)
	}
	must(t, back.Delete(ctx))
	if d := storeOf(t, open(t, srv, "acct")); d.ID != nil {
		t.Errorf("deleted device still loads as %s", d.ID)
	}
	if ok, _ := back.Sessions.HasSession(ctx, "15550001:1"); ok {
		t.Error("a deleted device's sessions remain")
	}
}

func TestAccountNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{{"default", true}, {"work-2_x", true}, {"", false}, {"a.b", false}, {"a b", false}, {"*", false}, {"lid", false}} {
		if _, err := kvstore.New(nil, tc.name, nil); (err == nil) != tc.ok {
			t.Errorf("New(%q) err = %v", tc.name, err)
		}
	}
}

// TestDeletedKeysLeaveNoMarker: with the bucket's marker TTL, a deleted
// key (every decrypted-event buffer entry is one, 14 days after its
// message) leaves nothing once its marker expires; a marker kept for
// good grew the bucket with every message ever received.
func TestDeletedKeysLeaveNoMarker(t *testing.T) {
	srv := bustest.StartServer(t)
	b := srv.Connect(t, "nf")
	kv, err := b.JS.CreateOrUpdateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: b.Space.Bucket("whatsapp"), History: 1, LimitMarkerTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c, err := kvstore.New(kv, "acct", nil, kvstore.WithMarkerTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	d := storeOf(t, c)
	must(t, d.Sessions.PutSession(t.Context(), "15550001:1", []byte("s1")))
	must(t, d.Sessions.DeleteSession(t.Context(), "15550001:1"))
	if ok, err := d.Sessions.HasSession(t.Context(), "15550001:1"); err != nil || ok {
		t.Fatalf("deleted session still there: %v, %v", ok, err)
	}
	stream, err := b.JS.Stream(t.Context(), "KV_"+b.Space.Bucket("whatsapp"))
	if err != nil {
		t.Fatal(err)
	}
	bustest.WaitSubjects(t, stream, 0, 30*time.Second)
}
