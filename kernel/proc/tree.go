package proc

import (
	"errors"
	"sync"
	"time"
)

// Tree is a process tree: the session a spawn without a Parent made (its
// root) and every session spawned with a Parent in it. Its members run as
// the root's uid, in cgroups inside the root's (counted in its limits),
// in the root's run loop; when the root ends, the whole tree is killed.
type Tree struct {
	// Set by the launcher when it makes the root's launch: the uid the
	// tree runs as (-1: the kernel's) and its cgroup (nil without).
	uid     int
	cg      *cgroup
	release func() // frees what the launcher took for the tree

	memory uint64 // its memory limit, for the reason an OOM kill gives

	mu       sync.Mutex
	root     *Session
	members  map[*Session]bool
	ended    bool
	spawning sync.WaitGroup // members being spawned
	// stopBy is when a clean stop's grace ends: until then the end of
	// the root lets the rest of the tree finish on its own.
	stopBy time.Time
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
