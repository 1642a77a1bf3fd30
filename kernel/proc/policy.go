package proc

import "github.com/kairo-os/kairo/sandbox"

// Policy is the sandbox the session's process runs in; nil when its
// launcher does not confine it. What the process asks the kernel to start
// holds no more than this.
func (s *Session) Policy() *sandbox.Policy { return s.l.Policy }
