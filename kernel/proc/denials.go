package proc

import (
	"strconv"
	"sync"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/manifests"
)

// A tree's refusals are coalesced: the first sight of an operation on an
// object is published after denySettle (with what came meanwhile), later
// hits only count, and the tree's end publishes the final count of each
// that grew since. A loop that hits one refusal a million times makes one
// event, or two. At most maxDenyKinds kinds are itemized per tree; the rest
// are counted in one event of op DeniedOther.
const (
	denySettle   = 250 * time.Millisecond
	maxDenyKinds = 64
	// uidLinger is how long a tree is still found by its uid after it
	// ended: the audit subsystem hands records over asynchronously.
	uidLinger = 10 * time.Second
)

type denyKey struct{ op, object string }

type denyEntry struct {
	d         abi.SandboxDenied
	published int // the count last published; 0: never
}

// denials is a tree's coalescing of refusals.
type denials struct {
	mu      sync.Mutex
	byKey   map[denyKey]*denyEntry
	order   []*denyEntry
	more    *denyEntry // past maxDenyKinds
	timer   *time.Timer
	ended   bool
	publish func(abi.SandboxDenied)
}

// Deny reports a refusal of the tree's: d names the operation, its object
// and who saw it (ProcessID may be empty: the tree's root is named then).
// It is coalesced with the tree's other refusals of the same operation on
// the same object, and published as kairo.sandbox.denied.
func (t *Tree) Deny(d abi.SandboxDenied) {
	t.mu.Lock()
	root := t.root
	t.mu.Unlock()
	if root == nil {
		return
	}
	if d.ProcessID == "" {
		d.ProcessID = root.id
		if d.Skill == "" {
			d.Skill = root.spec.Skill
		}
	}
	if d.Count <= 0 {
		d.Count = 1
	}
	if d.Grant == "" && d.Reporter != "egress" {
		// The proxy names its own (none for a listed host it refused
		// because of where it resolved).
		d.Grant = GrantLine(d.Op, d.Object)
	}
	dn := &t.denials
	dn.mu.Lock()
	defer dn.mu.Unlock()
	if dn.byKey == nil {
		dn.byKey = map[denyKey]*denyEntry{}
		dn.publish = func(d abi.SandboxDenied) { root.m.publishDenied(root, d) }
	}
	k := denyKey{d.Op, d.Object}
	e := dn.byKey[k]
	switch {
	case e != nil:
		e.d.Count += d.Count
	case len(dn.byKey) < maxDenyKinds:
		e = &denyEntry{d: d}
		dn.byKey[k] = e
		dn.order = append(dn.order, e)
	case dn.more != nil:
		dn.more.d.Count += d.Count
	default:
		dn.more = &denyEntry{d: abi.SandboxDenied{
			ProcessID: root.id, Skill: root.spec.Skill, Op: abi.DeniedOther, Object: "more refusals",
			Detail: "the tree was refused more kinds of operation than are itemized", Count: d.Count, Reporter: d.Reporter,
		}}
		dn.order = append(dn.order, dn.more)
	}
	if dn.ended {
		dn.flushLocked()
		return
	}
	if dn.timer == nil {
		dn.timer = time.AfterFunc(denySettle, dn.settled)
	}
}

// settled publishes what came since the first sight of each refusal not
// yet published.
func (dn *denials) settled() {
	dn.mu.Lock()
	defer dn.mu.Unlock()
	for _, e := range dn.order {
		if e.published == 0 {
			e.published = e.d.Count
			dn.publish(e.d)
		}
	}
}

// end publishes every refusal whose count grew since it was published; a
// refusal reported later is published at once.
func (dn *denials) end() {
	dn.mu.Lock()
	defer dn.mu.Unlock()
	dn.ended = true
	if dn.timer != nil {
		dn.timer.Stop()
	}
	dn.flushLocked()
}

func (dn *denials) flushLocked() {
	for _, e := range dn.order {
		if e.d.Count != e.published {
			e.published = e.d.Count
			dn.publish(e.d)
		}
	}
}

// publishDenied publishes kairo.sandbox.denied for root's tree.
func (m *Manager) publishDenied(root *Session, d abi.SandboxDenied) {
	// A refusal of a member names the member: it is the same tree, and its
	// events carry the root's correlation either way.
	s := root
	if d.ProcessID != root.id {
		if x, ok := m.Get(d.ProcessID); ok {
			s = x
		}
	}
	m.publish(s, abi.SubjectSandboxDenied, d)
}

// TreeOfUID is the process tree that runs as uid, under a sandboxing
// launcher run as root (each tree has a uid of its own), also for a few
// seconds after it ended; nil when there is none.
func (m *Manager) TreeOfUID(uid int) *Tree {
	m.treesMu.Lock()
	defer m.treesMu.Unlock()
	return m.byUID[uid]
}

// TreeOfPID is the process tree of the session whose leader is pid; nil
// when there is none.
func (m *Manager) TreeOfPID(pid int) *Tree {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.byPID[pid]; s != nil {
		return s.tree
	}
	return nil
}

// trackUID makes the tree of root findable by its uid (TreeOfUID).
func (m *Manager) trackUID(t *Tree) {
	if t.uid <= 0 {
		return
	}
	m.treesMu.Lock()
	if m.byUID == nil {
		m.byUID = map[int]*Tree{}
	}
	m.byUID[t.uid] = t
	m.treesMu.Unlock()
}

// untrackUID forgets the tree's uid after uidLinger, unless a new tree
// has it by then.
func (m *Manager) untrackUID(t *Tree) {
	if t.uid <= 0 {
		return
	}
	time.AfterFunc(uidLinger, func() {
		m.treesMu.Lock()
		if m.byUID[t.uid] == t {
			delete(m.byUID, t.uid)
		}
		m.treesMu.Unlock()
	})
}

// GrantLine is the skill manifest line that would allow op on object, as
// a refusal reports it; "" for what no manifest line grants (a system
// call the filter always refuses, a scope).
func GrantLine(op, object string) string {
	list := func(table, key, v string) string { return "[" + table + "] " + key + " = [" + strconv.Quote(v) + "]" }
	switch op {
	case abi.DeniedRead:
		return list("fs", "read", object)
	case abi.DeniedWrite:
		return list("fs", "write", object)
	case abi.DeniedExec:
		return list("fs", "exec", object)
	case abi.DeniedHost:
		if manifests.IsHostPort(object) { // one host and port, never a pattern
			return list("net", "hosts", object)
		}
	case abi.DeniedConnectTCP, abi.DeniedBindTCP:
		key := "connect_tcp"
		if op == abi.DeniedBindTCP {
			key = "bind_tcp"
		}
		if _, err := strconv.ParseUint(object, 10, 16); err == nil {
			return "[net] " + key + " = [" + object + "]"
		}
	}
	return ""
}

// GrantsFor is what an approval adds for the refusals ds: exactly the
// grants [GrantLine] names, each once. A host is added only when its
// refusal names a grant and is one host and port: the proxy names none
// for a listed host refused for its address, nor for a pattern.
func GrantsFor(ds []abi.SandboxDenied) abi.Grants {
	var g abi.Grants
	add := func(s []string, v string) []string {
		for _, x := range s {
			if x == v {
				return s
			}
		}
		return append(s, v)
	}
	addPort := func(s []uint16, v string) []uint16 {
		n, err := strconv.ParseUint(v, 10, 16)
		if err != nil || n == 0 {
			return s
		}
		for _, x := range s {
			if x == uint16(n) {
				return s
			}
		}
		return append(s, uint16(n))
	}
	for _, d := range ds {
		switch d.Op {
		case abi.DeniedRead:
			g.Read = add(g.Read, d.Object)
		case abi.DeniedWrite:
			g.Write = add(g.Write, d.Object)
		case abi.DeniedExec:
			g.Exec = add(g.Exec, d.Object)
		case abi.DeniedHost:
			if d.Grant != "" && manifests.IsHostPort(d.Object) {
				g.Hosts = add(g.Hosts, d.Object)
			}
		case abi.DeniedConnectTCP:
			g.ConnectTCP = addPort(g.ConnectTCP, d.Object)
		case abi.DeniedBindTCP:
			g.BindTCP = addPort(g.BindTCP, d.Object)
		}
	}
	return g
}
