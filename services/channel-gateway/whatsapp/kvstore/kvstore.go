package kvstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nats-io/nats.go/jetstream"
	"go.mau.fi/util/random"
	"go.mau.fi/whatsmeow/proto/waAdv"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/util/keys"
	waLog "go.mau.fi/whatsmeow/util/log"
)

// lidPrefix starts the keys of the LID map every account shares.
const lidPrefix = "lid"

var accountRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// ValidAccount says whether account can name a device here: letters,
// digits, '-' and '_', and not "lid" (the shared LID map's prefix).
func ValidAccount(account string) bool {
	return accountRE.MatchString(account) && account != lidPrefix
}

// Container keeps one account's device in a KV bucket. It implements
// [store.DeviceContainer] and, as [Store], every per-device store.
type Container struct {
	kv      jetstream.KeyValue
	account string
	log     waLog.Logger
	// markerTTL is how long a deleted key's marker stays (0: for good).
	markerTTL time.Duration
}

// Option changes a Container.
type Option func(*Container)

// WithMarkerTTL makes a deleted key's marker expire after d, for a
// bucket with per-message TTLs (its LimitMarkerTTL): every message
// received leaves a key in the decrypted event buffer, deleted 14 days
// later, and markers kept for good would grow the bucket with every
// message ever received.
func WithMarkerTTL(d time.Duration) Option { return func(c *Container) { c.markerTTL = d } }

var _ store.DeviceContainer = (*Container)(nil)

// New returns the container for account (letters, digits, '-' and '_')
// in kv.
func New(kv jetstream.KeyValue, account string, log waLog.Logger, opts ...Option) (*Container, error) {
	if !ValidAccount(account) {
		return nil, fmt.Errorf("kvstore: account %q: only letters, digits, '-' and '_', and not %q (the shared LID map)", account, lidPrefix)
	}
	if log == nil {
		log = waLog.Noop
	}
	c := &Container{kv: kv, account: account, log: log}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// device is the stored form of a [store.Device]'s own fields.
type device struct {
	ID             string    `json:"id"`
	LID            string    `json:"lid,omitempty"`
	RegistrationID uint32    `json:"registrationId"`
	NoisePriv      []byte    `json:"noise"`
	IdentityPriv   []byte    `json:"identity"`
	PreKeyPriv     []byte    `json:"signedPreKey"`
	PreKeyID       uint32    `json:"signedPreKeyId"`
	PreKeySig      []byte    `json:"signedPreKeySig"`
	AdvSecretKey   []byte    `json:"advSecret"`
	Account        []byte    `json:"account,omitempty"` // waAdv.ADVSignedDeviceIdentity fields, JSON
	Platform       string    `json:"platform,omitempty"`
	BusinessName   string    `json:"businessName,omitempty"`
	PushName       string    `json:"pushName,omitempty"`
	FacebookUUID   string    `json:"facebookUuid,omitempty"`
	LIDMigration   int64     `json:"lidMigration,omitempty"`
	Saved          time.Time `json:"saved"`
}

type advIdentity struct {
	Details, AccountSignature, AccountSignatureKey, DeviceSignature []byte
}

// Device returns the stored device, or a new unlinked one (ID nil) when
// none is stored; either is ready for whatsmeow.NewClient.
func (c *Container) Device(ctx context.Context) (*store.Device, error) {
	e, err := bus.Get(ctx, c.kv, c.key("device"))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return c.newDevice(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("kvstore: read device: %w", err)
	}
	var d device
	if err := json.Unmarshal(e.Value(), &d); err != nil {
		return nil, fmt.Errorf("kvstore: decode device: %w", err)
	}
	if len(d.NoisePriv) != 32 || len(d.IdentityPriv) != 32 || len(d.PreKeyPriv) != 32 || len(d.PreKeySig) != 64 {
		return nil, errors.New("kvstore: stored device has keys of the wrong length")
	}
	id, err := types.ParseJID(d.ID)
	if err != nil {
		return nil, fmt.Errorf("kvstore: stored device id: %w", err)
	}
	dev := &store.Device{
		Log:            c.log,
		ID:             &id,
		RegistrationID: d.RegistrationID,
		NoiseKey:       keys.NewKeyPairFromPrivateKey([32]byte(d.NoisePriv)),
		IdentityKey:    keys.NewKeyPairFromPrivateKey([32]byte(d.IdentityPriv)),
		SignedPreKey: &keys.PreKey{
			KeyPair: *keys.NewKeyPairFromPrivateKey([32]byte(d.PreKeyPriv)), KeyID: d.PreKeyID,
			Signature: (*[64]byte)(d.PreKeySig),
		},
		AdvSecretKey:          d.AdvSecretKey,
		Platform:              d.Platform,
		BusinessName:          d.BusinessName,
		PushName:              d.PushName,
		LIDMigrationTimestamp: d.LIDMigration,
	}
	if d.LID != "" {
		if dev.LID, err = types.ParseJID(d.LID); err != nil {
			return nil, fmt.Errorf("kvstore: stored device lid: %w", err)
		}
	}
	var adv advIdentity
	if len(d.Account) > 0 {
		if err := json.Unmarshal(d.Account, &adv); err != nil {
			return nil, fmt.Errorf("kvstore: stored device account: %w", err)
		}
	}
	dev.Account = &waAdv.ADVSignedDeviceIdentity{
		Details: adv.Details, AccountSignature: adv.AccountSignature,
		AccountSignatureKey: adv.AccountSignatureKey, DeviceSignature: adv.DeviceSignature,
	}
	if d.FacebookUUID != "" {
		_ = dev.FacebookUUID.UnmarshalText([]byte(d.FacebookUUID)) // written by MarshalText
	}
	c.attach(dev)
	return dev, nil
}

func (c *Container) newDevice() *store.Device {
	dev := &store.Device{
		Log:            c.log,
		NoiseKey:       keys.NewKeyPair(),
		IdentityKey:    keys.NewKeyPair(),
		RegistrationID: rand.Uint32(),
		AdvSecretKey:   random.Bytes(32),
	}
	dev.SignedPreKey = dev.IdentityKey.CreateSignedPreKey(1)
	c.attach(dev)
	return dev
}

// attach points a device's stores at this container.
func (c *Container) attach(dev *store.Device) {
	s := &Store{c: c}
	dev.Identities, dev.Sessions, dev.PreKeys, dev.SenderKeys = s, s, s, s
	dev.AppStateKeys, dev.AppState, dev.Contacts, dev.ChatSettings = s, s, s, s
	dev.MsgSecrets, dev.PrivacyTokens, dev.EventBuffer, dev.LIDs = s, s, s, s
	dev.Container = c
	dev.Initialized = true
}

// PutDevice stores dev's own fields; whatsmeow calls it through
// Device.Save once linked and when they change.
func (c *Container) PutDevice(ctx context.Context, dev *store.Device) error {
	if dev.ID == nil {
		return ErrNoID
	}
	d := device{
		ID: dev.ID.String(), RegistrationID: dev.RegistrationID,
		NoisePriv: dev.NoiseKey.Priv[:], IdentityPriv: dev.IdentityKey.Priv[:],
		PreKeyPriv: dev.SignedPreKey.Priv[:], PreKeyID: dev.SignedPreKey.KeyID, PreKeySig: dev.SignedPreKey.Signature[:],
		AdvSecretKey: dev.AdvSecretKey, Platform: dev.Platform, BusinessName: dev.BusinessName, PushName: dev.PushName,
		LIDMigration: dev.LIDMigrationTimestamp, Saved: time.Now().UTC(),
	}
	if !dev.LID.IsEmpty() {
		d.LID = dev.LID.String()
	}
	if a := dev.Account; a != nil {
		d.Account, _ = json.Marshal(advIdentity{a.Details, a.AccountSignature, a.AccountSignatureKey, a.DeviceSignature}) // byte slices always encode
	}
	if dev.FacebookUUID != [16]byte{} {
		d.FacebookUUID = dev.FacebookUUID.String()
	}
	if !dev.Initialized {
		c.attach(dev)
	}
	return c.put(ctx, c.key("device"), d)
}

// DeleteDevice forgets the account's device and everything stored for it
// (logged out): the next Device call returns a new unlinked one.
func (c *Container) DeleteDevice(ctx context.Context, dev *store.Device) error {
	if dev.ID == nil {
		return ErrNoID
	}
	return c.deleteMatching(ctx, c.account+".>")
}

// Linked reports the account's WhatsApp id, empty when no device is
// stored.
func (c *Container) Linked(ctx context.Context) (string, error) {
	e, err := bus.Get(ctx, c.kv, c.key("device"))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("kvstore: read device: %w", err)
	}
	var d device
	if err := json.Unmarshal(e.Value(), &d); err != nil {
		return "", fmt.Errorf("kvstore: decode device: %w", err)
	}
	return d.ID, nil
}

// key joins the account and parts; the last parts are encoded.
func (c *Container) key(kind string, parts ...string) string {
	return c.account + "." + kind + encParts(parts)
}

func encParts(parts []string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(".")
		b.WriteString(enc(p))
	}
	return b.String()
}

// enc makes any string a valid key token: 'k' then base64url, so an
// empty string is a token too.
func enc(s string) string { return "k" + base64.RawURLEncoding.EncodeToString([]byte(s)) }

func dec(tok string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, "k"))
	return string(b), err
}

func (c *Container) put(ctx context.Context, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("kvstore: encode %s: %w", key, err)
	}
	return c.putRaw(ctx, key, data)
}

func (c *Container) putRaw(ctx context.Context, key string, data []byte) error {
	if _, err := c.kv.Put(ctx, key, data); err != nil {
		return fmt.Errorf("kvstore: put %s: %w", key, err)
	}
	return nil
}

// get decodes key into v; found is false when the key is absent.
func (c *Container) get(ctx context.Context, key string, v any) (found bool, err error) {
	data, found, err := c.getRaw(ctx, key)
	if err != nil || !found {
		return found, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("kvstore: decode %s: %w", key, err)
	}
	return true, nil
}

func (c *Container) getRaw(ctx context.Context, key string) ([]byte, bool, error) {
	e, err := bus.Get(ctx, c.kv, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("kvstore: get %s: %w", key, err)
	}
	return e.Value(), true, nil
}

func (c *Container) del(ctx context.Context, key string) error {
	var opts []jetstream.KVDeleteOpt
	if c.markerTTL > 0 {
		opts = append(opts, jetstream.PurgeTTL(c.markerTTL))
	}
	if err := c.kv.Purge(ctx, key, opts...); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("kvstore: delete %s: %w", key, err)
	}
	return nil
}

// keys lists the keys matching a subject filter (with * and >).
func (c *Container) keys(ctx context.Context, filter string) ([]string, error) {
	l, err := c.kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("kvstore: list %s: %w", filter, err)
	}
	defer l.Stop()
	var out []string
	for k := range l.Keys() {
		out = append(out, k)
	}
	return out, nil
}

func (c *Container) deleteMatching(ctx context.Context, filter string) error {
	ks, err := c.keys(ctx, filter)
	if err != nil {
		return err
	}
	for _, k := range ks {
		if err := c.del(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

func u32(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

func jsonOf(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("kvstore: encode: %w", err)
	}
	return data, nil
}

func isExists(err error) bool { return errors.Is(err, jetstream.ErrKeyExists) }
