package kernel

import (
	"sync"

	"github.com/kairo-os/kairo/kernel/proc"
)

// stdinWriters holds the processes with a stdin write in flight: one at a
// time each, so a client cannot queue writes (and the params that carry
// them) behind a process that does not read. An entry lives only while its
// write does.
var stdinWriters sync.Map // *proc.Session → struct{}

// enterStdin claims s's stdin for one write; false if a write is already
// in flight. The caller calls the returned func when its write returns.
func enterStdin(s *proc.Session) (leave func(), ok bool) {
	if _, busy := stdinWriters.LoadOrStore(s, struct{}{}); busy {
		return nil, false
	}
	return func() { stdinWriters.Delete(s) }, true
}
