package bus

import (
	"sync"

	"github.com/kairo-os/kairo/abi"
)

var kernelPatterns = sync.OnceValue(func() []*abi.Pattern {
	ps := make([]*abi.Pattern, len(abi.KernelSubjects))
	for i, s := range abi.KernelSubjects {
		ps[i] = abi.MustCompilePattern(s)
	}
	return ps
})

// KernelOwned reports whether subject is one of [abi.KernelSubjects]: only
// the kernel and the host publish it, whatever a caller was granted.
func KernelOwned(subject string) bool {
	for _, p := range kernelPatterns() {
		if p.Match(subject) {
			return true
		}
	}
	return false
}
