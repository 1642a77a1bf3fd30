package bus

import (
	"time"

	"github.com/kairo-os/kairo/abi"
)

// newIDAt is [abi.NewIDAt], by the name the outage and unreachable
// reports call it.
func newIDAt(now time.Time) string { return abi.NewIDAt(now) }
