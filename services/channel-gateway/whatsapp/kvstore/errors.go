package kvstore

import "errors"

// ErrNoID is returned when a device is saved or deleted before WhatsApp
// gave it an id (before the QR code was scanned).
var ErrNoID = errors.New("kvstore: the device has no id yet")
