package sandbox

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// A warm helper can install, while it waits, the seccomp filter its spawn
// will most likely have: installing one is the largest step of the
// helper's confinement, a third of a millisecond of the spawn's path on 2
// shared cores (the kernel checks the program, translates and compiles it,
// and works out its syscall cache). A filter cannot be taken off again,
// so a spawn whose plan has another filter must go to another helper
// ([Cmd.Fits]); the helper checks it too and refuses a plan whose filter
// is not the one it installed. Installing it before the uid drop and the
// Landlock ruleset changes nothing they need: the filter refuses none of
// their calls, and it binds every thread of the helper and so the target
// exactly as when installed last.

// WarmFilter names the seccomp filter a warm helper installs while it
// waits: the filter of the policies whose sockets are Sockets and whose
// LogDenials is Log.
type WarmFilter struct {
	Sockets FilterPolicy
	Log     bool
}

// WarmFilterOf is the filter p's spawns have, nil when they have none
// (SkipSeccomp).
func WarmFilterOf(p *Policy) *WarmFilter {
	if p.SkipSeccomp {
		return nil
	}
	return &WarmFilter{Sockets: p.filterPolicy(), Log: p.LogDenials}
}

// Fits reports whether a warm helper that installed f (nil: none) may run
// c: when it installed none, or c's filter is f.
func (c *Cmd) Fits(f *WarmFilter) bool {
	return f == nil || c.filter != nil && *c.filter == *f
}

// warmFilterArg is f as a warm helper's argument: "filter:" and the
// granted socket kinds and "log", comma-separated.
func (f *WarmFilter) arg() string {
	var kinds []string
	for _, k := range []struct {
		name string
		on   bool
	}{{"tcp", f.Sockets.TCP}, {"udp", f.Sockets.UDP}, {"unix", f.Sockets.Unix}, {"log", f.Log}} {
		if k.on {
			kinds = append(kinds, k.name)
		}
	}
	return warmFilterPrefix + strings.Join(kinds, ",")
}

const warmFilterPrefix = "filter:"

// parseWarmFilter reads arg as warmFilterArg wrote it.
func parseWarmFilter(arg string) (WarmFilter, error) {
	var f WarmFilter
	list, ok := strings.CutPrefix(arg, warmFilterPrefix)
	if !ok {
		return f, fmt.Errorf("a warm helper's argument %q is not a filter", arg)
	}
	for _, k := range strings.Split(list, ",") {
		switch k {
		case "":
		case "tcp":
			f.Sockets.TCP = true
		case "udp":
			f.Sockets.UDP = true
		case "unix":
			f.Sockets.Unix = true
		case "log":
			f.Log = true
		default:
			return f, fmt.Errorf("a warm helper's filter names %q, not a socket kind or log", k)
		}
	}
	return f, nil
}

// filterPrepared is the filter this warm helper installed while it
// waited: its program and whether it logs (prog nil: none), or why the
// install failed.
var filterPrepared struct {
	prog []unix.SockFilter
	log  bool
	err  error
}

// prepareFilter installs, off the spawn's path, the filter arg names. It
// comes after every step of the wait that the filter refuses (the private
// /proc's mount). A failed install is the spawn's failure: part of the
// filter may be in place.
func prepareFilter(arg string) {
	f, err := parseWarmFilter(arg)
	if err != nil {
		filterPrepared.err = err
		return
	}
	prog, err := filterFor(f.Sockets)
	if err == nil {
		install := installQuiet
		if f.Log {
			install = InstallFilter
		}
		err = install(prog)
	}
	if err != nil {
		filterPrepared.err = err
		return
	}
	filterPrepared.prog, filterPrepared.log = prog, f.Log
}

// errFilterMismatch is a plan handed to a warm helper that installed
// another filter: the kernel must give such a plan to another helper.
var errFilterMismatch = errors.New("sandbox: the warm helper installed a seccomp filter other than the plan's; refusing to run")

// installPlanFilter gives this thread p's filter: installs it, or checks
// that the one installed while the helper waited is p's.
func installPlanFilter(p *plan) error {
	if filterPrepared.err != nil {
		return fmt.Errorf("sandbox: the seccomp filter installed while the helper waited: %w", filterPrepared.err)
	}
	if filterPrepared.prog != nil {
		if !slices.Equal(filterPrepared.prog, p.filter) || filterPrepared.log != p.logDenials {
			return errFilterMismatch
		}
		return nil
	}
	if p.filter == nil {
		return nil
	}
	if p.logDenials {
		return InstallFilter(p.filter)
	}
	return installQuiet(p.filter)
}
