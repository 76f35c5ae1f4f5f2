// Package kvstore keeps a whatsmeow device (the linked WhatsApp account's
// identity, Signal sessions, pre-keys, sender keys, app state keys and
// versions, contacts, chat settings, message secrets, privacy tokens,
// buffered events and LID mappings) in a JetStream KV bucket instead of a
// SQL database on one machine's disk, so that any gateway that takes over
// the account's connection lease finds the link as the last holder left
// it, and the link survives restarts.
//
// One [Container] holds one account, under a key prefix named for it; LID
// mappings are shared by every account in the bucket, as whatsmeow
// expects. Keys are built from base64url-encoded parts, so any address or
// JID is a valid key. A Container is used by one gateway at a time (the
// lease holder); within it, read-modify-write steps are serialised by a
// mutex, and the KV's own revision checks are not needed.
//
// whatsmeow wraps decryption in [Store.DoDecryptionTxn] for SQL
// atomicity; a KV has no transactions, so fn runs as is: a crash between
// a session update and the buffered event costs at most one retried
// decryption, which whatsmeow handles as a duplicate.
package kvstore
