package sandbox

import (
	"debug/elf"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// A dynamically linked binary is started by its ELF interpreter, which the
// kernel opens for execution too: Landlock must let it execute, or nothing
// dynamic runs. withLoaders returns p with the interpreters of target, of
// every file granted execute, and of /bin/sh (the system's loader, for the
// binaries inside granted folders) added to p.Exec.
//
// Known limit, as in every Landlock sandbox: the loader can also be run by
// hand on a file the binary may read (`ld.so ./prog`), which maps that file
// without an execute check. Write grants should not overlap read paths that
// hold untrusted code if that matters.
func (p *Policy) withLoaders(target string) *Policy {
	q := *p
	q.Exec = slices.Clone(p.Exec)
	add := func(bin string) {
		interp := interpreter(bin)
		if interp == "" {
			return
		}
		interp = realInterpreter(interp)
		if !under(interp, q.Exec) {
			q.Exec = append(q.Exec, interp)
		}
	}
	add(target)
	add("/bin/sh")
	for _, e := range p.Exec {
		add(e)
	}
	return &q
}

// realInterpreters caches the resolved path of each interpreter: a few
// loaders serve every binary, and resolving one link by link was a third
// of a spawn's Command. Like [systemPaths], a loader moved since is found
// again after a restart; until then the old path is granted, and a binary
// whose loader is no longer there does not start.
var realInterpreters sync.Map // string → string

func realInterpreter(interp string) string {
	if v, ok := realInterpreters.Load(interp); ok {
		return v.(string)
	}
	real, err := filepath.EvalSymlinks(interp)
	if err != nil {
		return interp // not cached: it may appear
	}
	realInterpreters.Store(interp, real)
	return real
}

// interpreters caches interpreter by file, as a spawn asks for the same
// few binaries again and again; a file that changed is read again.
var interpreters sync.Map // interpKey → string

type interpKey struct {
	path  string
	size  int64
	mtime int64
}

// interpreter is the PT_INTERP of the ELF file at path; "" when it is not a
// dynamically linked ELF file (or not a file).
func interpreter(path string) string {
	if f, ok := systemPaths()[path]; ok && (f.dir || !f.exists) {
		return "" // a system folder: not looked at again
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	key := interpKey{path, fi.Size(), fi.ModTime().UnixNano()}
	if v, ok := interpreters.Load(key); ok {
		return v.(string)
	}
	interp := readInterpreter(path)
	interpreters.Store(key, interp)
	return interp
}

func readInterpreter(path string) string {
	f, err := elf.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(b, 0); err != nil {
			return ""
		}
		for len(b) > 0 && b[len(b)-1] == 0 {
			b = b[:len(b)-1]
		}
		return string(b)
	}
	return ""
}
