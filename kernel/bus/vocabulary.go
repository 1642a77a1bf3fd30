package bus

import (
	"time"

	"github.com/kairo-os/kairo/abi"
)

// The subject grammar and event ids are abi's ([abi.ValidateSubject],
// [abi.NewID]). The store files still call them by the names they had in
// this package; these go when the stores move into packages of their own.

// ValidateSubject is [abi.ValidateSubject].
//
// Deprecated: call [abi.ValidateSubject].
func ValidateSubject(s string) error { return abi.ValidateSubject(s) }

func newIDAt(now time.Time) string                  { return abi.NewIDAt(now) }
func parseCanonicalUUID(s string, u *[16]byte) bool { return abi.ParseUUID(s, u) }
