package bus

import "github.com/kairo-os/kairo/kernel/bus/internal/hook"

// The views of a bus's private state that the drivers' tests read
// (kernel/bus/internal/hook), and the tunable that starts at MaxKept.
func init() {
	hook.MaxKept = MaxKept
	hook.FollowerDone = func(b any) <-chan struct{} { return b.(*Bus).follow.done }
	hook.StopProbe = func(b any) { b.(*Bus).unreach.stopProbe() }
	hook.Probing = func(b any) bool {
		u := &b.(*Bus).unreach
		u.mu.Lock()
		defer u.mu.Unlock()
		return u.probing
	}
}
