package bus

import (
	"crypto/sha256"
	"encoding/hex"
)

// StableID is a short id derived from parts (e.g. session, turn, task):
// the same parts give the same id, so a redelivered turn that creates
// something (a scheduled job, a subagent) creates it once.
func StableID(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:8]
}
