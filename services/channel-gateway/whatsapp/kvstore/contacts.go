package kvstore

import (
	"context"
	"strings"
	"time"

	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
)

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
