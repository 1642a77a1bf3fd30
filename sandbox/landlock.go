package sandbox

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Filesystem rights by the Landlock ABI that introduced them.
const (
	fsV1 = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSReadDir |
		ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeChar | ll.AccessFSMakeDir |
		ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeBlock |
		ll.AccessFSMakeSym
	fsV2 = fsV1 | ll.AccessFSRefer
	fsV3 = fsV2 | ll.AccessFSTruncate
	fsV5 = fsV3 | ll.AccessFSIoctlDev

	netTCP = ll.AccessNetBindTCP | ll.AccessNetConnectTCP
	scopes = ll.ScopeAbstractUnixSocket | ll.ScopeSignal
)

// The rights each kind of grant gives, before they are cut to what the
// kernel handles.
const (
	readDir   = ll.AccessFSReadFile | ll.AccessFSReadDir
	readFile  = ll.AccessFSReadFile
	execDir   = ll.AccessFSExecute | readDir
	execFile  = ll.AccessFSExecute | readFile
	writeFile = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate
	// Everything but execute and device nodes: create, write, truncate,
	// rename and remove files, folders, links, fifos and sockets.
	writeDir = readDir | ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSRemoveDir |
		ll.AccessFSRemoveFile | ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSym |
		ll.AccessFSMakeFifo | ll.AccessFSMakeSock | ll.AccessFSRefer
)

// Devices every sandbox may use: the data sinks and sources programs open
// without thinking. Nothing else under /dev.
var (
	devReadWrite = []string{"/dev/null", "/dev/zero", "/dev/full"}
	devRead      = []string{"/dev/random", "/dev/urandom"}
)

var abiOnce = sync.OnceValue(func() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
})

// LandlockABI is the Landlock ABI version of the running kernel; 0 when
// Landlock is missing or disabled.
func LandlockABI() int { return abiOnce() }

// handled is the Landlock configuration that handles every right the
// kernel at abi knows: whatever a rule does not grant is denied.
func handled(abi int) (landlock.Config, error) {
	var fs landlock.AccessFSSet
	switch {
	case abi >= 5:
		fs = fsV5
	case abi >= 3:
		fs = fsV3
	case abi >= 2:
		fs = fsV2
	case abi >= 1:
		fs = fsV1
	}
	args := []any{fs}
	if abi >= 4 {
		args = append(args, landlock.AccessNetSet(netTCP))
	}
	if abi >= 6 {
		args = append(args, landlock.ScopedSet(scopes))
	}
	c, err := landlock.NewConfig(args...)
	if err != nil {
		return landlock.Config{}, err
	}
	return *c, nil
}

// grant is one Landlock path rule, for the explanation and the ruleset.
type grant struct {
	path   string
	rights landlock.AccessFSSet
	kind   string // read, write, exec, device
}

// grants lists p's path rules. A path that does not exist grants nothing
// and is reported in missing.
func grants(p *Policy) (gs []grant, missing []string) {
	add := func(kind string, paths []string, dir, file landlock.AccessFSSet) {
		for _, path := range paths {
			if strings.HasPrefix(path, "$") { // a folder made at run time (explain)
				gs = append(gs, grant{path, dir, kind})
				continue
			}
			fi, err := os.Stat(path)
			if err != nil {
				missing = append(missing, kind+" "+path)
				continue
			}
			r := file
			if fi.IsDir() {
				r = dir
			}
			gs = append(gs, grant{path, r, kind})
		}
	}
	add("read", p.Read, readDir, readFile)
	add("write", p.Write, writeDir, writeFile)
	add("exec", p.Exec, execDir, execFile)
	add("device", devReadWrite, 0, writeFile)
	add("device", devRead, 0, readFile)
	return gs, missing
}

// ruleset is the Landlock configuration and rules for p on a kernel at abi.
func ruleset(p *Policy, abi int) (landlock.Config, []landlock.Rule, error) {
	cfg, err := handled(abi)
	if err != nil {
		return cfg, nil, err
	}
	gs, _ := grants(p)
	rules := make([]landlock.Rule, 0, len(gs)+len(p.ConnectTCP)+len(p.BindTCP))
	for _, g := range gs {
		r := g.rights & cfg.HandledAccessFS
		if r == 0 {
			continue
		}
		rules = append(rules, landlock.PathAccess(r, g.path))
	}
	if abi >= 4 {
		for _, port := range p.ConnectTCP {
			rules = append(rules, landlock.ConnectTCP(port))
		}
		for _, port := range p.BindTCP {
			rules = append(rules, landlock.BindTCP(port))
		}
	}
	return cfg, rules, nil
}

// applyLandlock confines the calling process (every thread) to p.
func applyLandlock(p *Policy) error {
	if err := checkEnforceable(p); err != nil {
		return err
	}
	abi := LandlockABI()
	if abi == 0 {
		return nil // best effort, as checkEnforceable allowed
	}
	cfg, rules, err := ruleset(p, abi)
	if err != nil {
		return err
	}
	if err := cfg.Restrict(rules...); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}

// existing is the paths of ps that exist on this machine.
func existing(ps []string) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		if _, err := os.Lstat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}
