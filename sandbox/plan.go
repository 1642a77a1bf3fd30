package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// plan is what the helper does, worked out by the kernel from a Policy:
// the Landlock rules with their rights, the seccomp program, the limits,
// the credentials and the environment. The helper opens no file to decide
// anything and decodes nothing but this, so that the time between its
// start and the target's is the system calls alone.
type plan struct {
	ruleset ll.RulesetAttr // zero: no Landlock (best effort on a kernel without it)
	rules   []rule
	connect []uint16
	bind    []uint16
	filter  []unix.SockFilter // nil: no filter (ablation tests)
	limits  Limits
	uid     int
	gid     int
	ipc     bool
	// privateProc mounts a procfs of the sandbox's own on /proc (see
	// procfs.go); set when the kernel, and so the helper, is root.
	privateProc bool
	logDenials  bool // Policy.LogDenials
	env         []string
}

// rule is one Landlock path rule.
type rule struct {
	path   string
	rights uint64
}

// makePlan works out p's plan for this kernel. p has passed
// checkEnforceable.
func makePlan(p *Policy) (*plan, error) {
	pl := &plan{
		connect: p.ConnectTCP, bind: p.BindTCP,
		limits: p.Limits, uid: p.UID, gid: p.GID, ipc: p.IPC, env: p.Env,
		privateProc: hidesProc() && !p.SharedProc, logDenials: p.LogDenials,
	}
	if abi := LandlockABI(); abi > 0 {
		pl.ruleset = handled(abi)
		gs, _ := grants(p)
		pl.rules = pathRules(gs, pl.ruleset.HandledAccessFS)
		if pl.ruleset.HandledAccessNet == 0 {
			pl.connect, pl.bind = nil, nil
		}
	}
	if !p.SkipSeccomp {
		prog, err := filterFor(p.filterPolicy())
		if err != nil {
			return nil, err
		}
		pl.filter = prog
	}
	return pl, nil
}

// pathRules are the Landlock rules of gs on a kernel that handles the
// rights handled: one per resolved path, with the rights of every grant of
// it (/bin and /usr/bin are one folder). Landlock merges them so anyway,
// and the helper opens each path once.
func pathRules(gs []grant, handled uint64) []rule {
	var rules []rule
	at := make(map[string]int, len(gs))
	for _, g := range gs {
		r := g.rights & handled
		if r == 0 {
			continue
		}
		if i, ok := at[g.real]; ok {
			rules[i].rights |= r
			continue
		}
		at[g.real] = len(rules)
		rules = append(rules, rule{g.real, r})
	}
	return rules
}

// filters caches the seccomp program of each FilterPolicy: there are eight.
var filters sync.Map // FilterPolicy → []unix.SockFilter

func filterFor(fp FilterPolicy) ([]unix.SockFilter, error) {
	if prog, ok := filters.Load(fp); ok {
		return prog.([]unix.SockFilter), nil
	}
	prog, err := BuildFilter(fp)
	if err != nil {
		return nil, err
	}
	filters.Store(fp, prog)
	return prog, nil
}

// The plan's encoding: unsigned varints, and strings and lists as a count
// and their items, in the order of the fields.

func (pl *plan) encode() []byte {
	b := make([]byte, 0, 4096)
	u := func(v uint64) { b = binary.AppendUvarint(b, v) }
	str := func(s string) { u(uint64(len(s))); b = append(b, s...) }
	flag := func(v bool) {
		if v {
			u(1)
		} else {
			u(0)
		}
	}
	u(pl.ruleset.HandledAccessFS)
	u(pl.ruleset.HandledAccessNet)
	u(pl.ruleset.Scoped)
	u(uint64(len(pl.rules)))
	for _, r := range pl.rules {
		str(r.path)
		u(r.rights)
	}
	for _, ports := range [][]uint16{pl.connect, pl.bind} {
		u(uint64(len(ports)))
		for _, p := range ports {
			u(uint64(p))
		}
	}
	flag(pl.filter != nil)
	u(uint64(len(pl.filter)))
	for _, f := range pl.filter {
		u(uint64(f.Code))
		u(uint64(f.Jt))
		u(uint64(f.Jf))
		u(uint64(f.K))
	}
	l := pl.limits
	for _, v := range []uint64{l.CPUSeconds, l.Memory, l.Processes, l.FileSize, l.OpenFiles, uint64(l.Wall), l.OutputBytes, l.OutputRate} {
		u(v)
	}
	u(uint64(int64(pl.uid)))
	u(uint64(int64(pl.gid)))
	flag(pl.ipc)
	flag(pl.privateProc)
	flag(pl.logDenials)
	u(uint64(len(pl.env)))
	for _, kv := range pl.env {
		str(kv)
	}
	return b
}

var errShortPlan = errors.New("the plan ends early")

func decodePlan(b []byte) (*plan, error) {
	pl := &plan{}
	var err error
	u := func() uint64 {
		if err != nil {
			return 0
		}
		v, n := binary.Uvarint(b)
		if n <= 0 {
			err = errShortPlan
			return 0
		}
		b = b[n:]
		return v
	}
	count := func() int {
		n := u()
		if n > uint64(len(b)) { // every item takes a byte at least
			err = errShortPlan
			return 0
		}
		return int(n)
	}
	str := func() string {
		n := count()
		if err != nil {
			return ""
		}
		s := string(b[:n])
		b = b[n:]
		return s
	}
	pl.ruleset.HandledAccessFS = u()
	pl.ruleset.HandledAccessNet = u()
	pl.ruleset.Scoped = u()
	pl.rules = make([]rule, count())
	for i := range pl.rules {
		pl.rules[i] = rule{str(), u()}
	}
	for _, ports := range []*[]uint16{&pl.connect, &pl.bind} {
		*ports = make([]uint16, count())
		for i := range *ports {
			(*ports)[i] = uint16(u())
		}
	}
	hasFilter := u() == 1
	prog := make([]unix.SockFilter, count())
	for i := range prog {
		prog[i] = unix.SockFilter{Code: uint16(u()), Jt: uint8(u()), Jf: uint8(u()), K: uint32(u())}
	}
	if hasFilter {
		pl.filter = prog
	}
	l := &pl.limits
	for _, v := range []*uint64{&l.CPUSeconds, &l.Memory, &l.Processes, &l.FileSize, &l.OpenFiles, nil, &l.OutputBytes, &l.OutputRate} {
		if v == nil {
			u() // the wall limit is the kernel's
			continue
		}
		*v = u()
	}
	pl.uid = int(int64(u()))
	pl.gid = int(int64(u()))
	pl.ipc = u() == 1
	pl.privateProc = u() == 1
	pl.logDenials = u() == 1
	pl.env = make([]string, count())
	for i := range pl.env {
		pl.env[i] = str()
	}
	if err != nil {
		return nil, fmt.Errorf("decode the plan: %w", err)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("decode the plan: %d bytes left over", len(b))
	}
	return pl, nil
}

// linkFree is path with every link on the way resolved, as the plan holds
// it: the helper opens it again without following links, so a folder
// swapped for a link between the kernel's check and the helper's open
// (a sandbox racing the start of its own child, in a folder it may write)
// grants nothing rather than the link's target. A path that does not
// resolve stays as it is.
func linkFree(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return path
}
