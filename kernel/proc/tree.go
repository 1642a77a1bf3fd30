package proc

import (
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/kairo-os/kairo/abi"
)

// Tree is a process tree: the session a spawn without a Parent made (its
// root) and every session spawned with a Parent in it. Its members run as
// the root's uid, in cgroups inside the root's (counted in its limits),
// in the root's run loop; when the root ends, the whole tree is killed.
type Tree struct {
	// Set by the launcher when it makes the root's launch: the uid the
	// tree runs as (-1: the kernel's) and its cgroup (nil without).
	uid int
	cg  *cgroup

	memory uint64 // its memory limit, for the reason an OOM kill gives

	mu       sync.Mutex
	root     *Session
	members  map[*Session]bool
	ended    bool
	spawning sync.WaitGroup // members being spawned
	// stopBy is when a clean stop's grace ends: until then the end of
	// the root lets the rest of the tree finish on its own.
	stopBy time.Time

	denials denials // what the sandbox refused it (Deny)
}

func newTree() *Tree { return &Tree{uid: -1, members: map[*Session]bool{}} }

// Root is the tree's first session; nil until Spawn has made it.
func (t *Tree) Root() *Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.root
}

// Tree is the process tree the session belongs to.
func (s *Session) Tree() *Tree { return s.tree }

var errTreeEnded = errors.New("the parent's process tree has ended")

// join starts s's spawn in the tree, unless the tree has ended: as its
// root, or as a member that joined() or failed() ends.
func (t *Tree) join(s *Session) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return errTreeEnded
	}
	if t.root == nil {
		t.root = s
	} else {
		t.spawning.Add(1)
	}
	return nil
}

// joined ends a member's spawn that worked.
func (t *Tree) joined(s *Session) {
	t.mu.Lock()
	t.members[s] = true
	t.mu.Unlock()
	t.spawning.Done()
}

// failed ends a spawn that did not work; a root's ends the tree.
func (t *Tree) failed(s *Session) {
	t.mu.Lock()
	root := t.root == s
	if root {
		t.ended = true
	}
	t.mu.Unlock()
	if !root {
		t.spawning.Done()
	}
}

// leave takes a member that has ended out of the tree.
func (t *Tree) leave(s *Session) {
	t.mu.Lock()
	delete(t.members, s)
	t.mu.Unlock()
}

// end marks the tree ended — no session joins it any more — waits for
// the spawns under way and returns the members in it.
func (t *Tree) end() []*Session {
	t.mu.Lock()
	t.ended = true
	t.mu.Unlock()
	t.spawning.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Session, 0, len(t.members))
	for s := range t.members {
		out = append(out, s)
	}
	return out
}

// stopDeadline is the end of a clean stop's grace, zero outside one.
func (t *Tree) stopDeadline() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stopBy
}

func (t *Tree) setStopDeadline(d time.Time) {
	t.mu.Lock()
	t.stopBy = d
	t.mu.Unlock()
}

// Stop is a clean stop: no spawn after it, and each tree gets SIGTERM and
// up to grace to end on its own before its cgroup (or process group) is
// killed. It returns once every tree has ended. Close does the rest.
func (m *Manager) Stop(grace time.Duration) {
	m.mu.Lock()
	m.closed = true
	var roots []*Session
	for _, s := range m.sessions {
		if s.tree.Root() == s {
			roots = append(roots, s)
		}
	}
	m.mu.Unlock()
	deadline := time.Now().Add(grace)
	var wg sync.WaitGroup
	for _, s := range roots {
		select {
		case <-s.done:
			continue
		default:
		}
		s.tree.setStopDeadline(deadline)
		wg.Add(1)
		go func() { defer wg.Done(); s.Terminate(grace) }()
	}
	wg.Wait()
	for _, s := range roots {
		<-s.done
	}
}

// leaveFailed takes a session whose spawn failed out of its tree; a root
// ends its tree.
func (s *Session) leaveFailed() { s.tree.failed(s) }

// abort ends the tree for reason, which the canceled and exited events
// carry.
func (s *Session) abort(reason string) {
	if !s.reason.CompareAndSwap(nil, &reason) {
		return // ended once already
	}
	s.m.publish(s, abi.SubjectProcessCanceled, abi.ProcessCanceled{ProcessID: s.id, PID: s.info.PID, Reason: reason})
	s.kill()
}

// oomKills is how many processes of the session's tree its memory limit
// has killed so far.
func (s *Session) oomKills() int {
	if s.tree.cg == nil {
		return 0
	}
	return s.tree.cg.oomKills()
}

// kill kills the session's processes at once: its cgroup, else its
// process group.
func (s *Session) kill() {
	if s.l.cg != nil {
		s.l.cg.kill()
		return
	}
	syscall.Kill(-s.pgid, syscall.SIGKILL)
}

// endTree, once the root has exited, kills the rest of the tree and waits
// for its members' exits. In a clean stop's grace the rest may first end
// on its own.
func (s *Session) endTree() {
	members := s.tree.end()
	if by := s.tree.stopDeadline(); s.tree.cg != nil && time.Now().Before(by) {
		s.tree.cg.waitEmpty(time.Until(by))
	}
	for _, m := range members {
		m.kill()
	}
	for _, m := range members {
		<-m.done
	}
}
