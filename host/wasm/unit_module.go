package wasm

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/manifests"
)

// A unit holds the module of its plugin (prepared.go) from its first start
// to its stop, so a restart after a failure only makes an instance of it.
// On a reload the old unit's module is handed over to the unit that
// replaces it (Manager.hints), so a reload of the same bytes — the same
// file written again — does not prepare it again either; and when the
// bytes changed, the rescan prepares (compiles) the new module before it
// stops the old unit, which serves meanwhile. A module no unit took is let
// go when the rescan ends. While the rescan compares a file of the old
// module's size with its bytes, an instance of that module is made for
// the new unit (readyInstance), and initialised while the old unit stops:
// a reload of the same bytes then waits for the longer of the two, not
// for both.

// unitModule is what a unit holds, under u.mu; and what a rescan hands
// over to the unit that replaces another.
type unitModule struct {
	prep  *Module   // the module its instances are made of
	hints []*Module // handed over, until prep is set
	// wasm is the module file as read, and the stamp it had then: a
	// restart with the file unchanged does not read it again. man is the
	// manifest as read then (or since, with the module file unchanged),
	// which a start with neither file changed does not read again.
	wasm  []byte
	stamp fileStamp
	man   *manifests.Plugin
	// ready is the instance a rescan made of prep's bytes while it
	// compared them with the file, for the unit's first start.
	ready *readyInstance
}

func (h *unitModule) release() {
	h.ready.discard()
	h.prep.Release()
	for _, mod := range h.hints {
		mod.Release()
	}
	*h = unitModule{}
}

// readFiles reads the plugin's manifest and module, each from the unit's
// last read when its file has the same size and time as then. The stamp
// is taken before the files are read, so a file changed meanwhile is read
// again next time.
func (u *unit) readFiles() (*manifests.Plugin, []byte, error) {
	if u.files.native != nil {
		return u.files.read()
	}
	stamp := stampOf(u.files.wasm)
	u.mu.Lock()
	wasm, same := u.held.wasm, u.held.wasm != nil && sameModuleFile(stamp, u.held.stamp)
	man := u.held.man
	if !same || stamp != u.held.stamp {
		man = nil
	}
	u.mu.Unlock()
	if man != nil {
		return man, wasm, nil
	}
	var err error
	if same {
		man, err = PluginManifest(u.files.wasm, wasm)
	} else {
		man, wasm, err = u.files.read()
	}
	if err == nil {
		u.mu.Lock()
		u.held.wasm, u.held.stamp, u.held.man = wasm, stamp, man
		u.mu.Unlock()
	}
	return man, wasm, err
}

// sameModuleFile reports whether two stamps say the module file is the
// same.
func sameModuleFile(a, b fileStamp) bool {
	return a.wasmSize == b.wasmSize && a.wasmTime.Equal(b.wasmTime)
}

// instance starts an instance of the unit's plugin: a built-in's, or one
// of the module the unit holds.
func (u *unit) instance(ctx context.Context, wasm []byte, opts InstanceConfig) (*Plugin, error) {
	if u.files.native != nil {
		return u.load(ctx, wasm, opts)
	}
	mod, err := u.module(ctx, wasm, opts)
	if err != nil {
		return nil, err
	}
	return mod.Instantiate(ctx, opts)
}

// module returns the module of wasm for opts: the one the unit holds, one
// handed over, or one the host prepares; the unit holds it from then on,
// and lets the others go.
func (u *unit) module(ctx context.Context, wasm []byte, opts InstanceConfig) (*Module, error) {
	want := opts
	want.defaults()
	u.mu.Lock()
	prep := u.held.prep
	if prep.fits(wasm, &want) {
		u.mu.Unlock()
		return prep, nil
	}
	var mod *Module
	for _, h := range u.held.hints {
		if h.fits(wasm, &want) {
			mod = h
			mod.retain()
			break
		}
	}
	u.mu.Unlock()
	if mod == nil {
		var err error
		if mod, err = u.m.cfg.Engine.Prepare(ctx, wasm, opts); err != nil {
			return nil, err
		}
	}
	u.mu.Lock()
	old := u.held
	u.held = unitModule{prep: mod, wasm: old.wasm, stamp: old.stamp, man: old.man}
	if len(old.wasm) > 0 && len(wasm) > 0 && &old.wasm[0] == &wasm[0] {
		u.held.wasm = mod.wasm // the same bytes: one copy
	}
	old.wasm = nil
	u.mu.Unlock()
	old.release()
	return mod, nil
}

// dropModules lets go of what the unit holds, as it stops.
func (u *unit) dropModules() {
	u.mu.Lock()
	old := u.held
	u.held = unitModule{}
	u.mu.Unlock()
	old.release()
}

// holdModule keeps the module the unit u holds for the unit that will
// replace it: newUnit takes it (takeHeld), and the scan that stopped u
// lets go of what no unit took (dropHints). With next, the plugin's files
// as the scan found them, it also prepares their module, now, while u
// serves, when its bytes are not u's.
func (m *Manager) holdModule(u *unit, next *pluginFiles) {
	u.mu.Lock()
	mod := u.held.prep
	if mod != nil {
		mod.retain() // under u.mu: the unit cannot release it meanwhile
	}
	man, manStamp := u.held.man, u.held.stamp
	u.mu.Unlock()
	var ahead unitModule
	if next != nil && next.native == nil {
		ahead = m.prepareAhead(*next, mod, keptManifest(man, manStamp))
	}
	if mod != nil {
		ahead.hints = append(ahead.hints, mod)
	}
	if ahead.hints == nil && ahead.wasm == nil {
		return
	}
	m.hintMu.Lock()
	if m.hints == nil {
		m.hints = map[string]*unitModule{}
	}
	prev := m.hints[u.name]
	m.hints[u.name] = &ahead
	m.hintMu.Unlock()
	if prev != nil {
		prev.release()
	}
}

// prepareAhead reads the plugin's files and, unless its module's bytes are
// those of cur, prepares them. What fails is left for the new unit to
// find again and report.
func (m *Manager) prepareAhead(f pluginFiles, cur *Module, kept func(fileStamp) *manifests.Plugin) unitModule {
	stamp := stampOf(f.wasm)
	var man *manifests.Plugin
	var wasm []byte
	var err error
	var ready *readyInstance
	if cur != nil && stamp.wasmSize == int64(len(cur.wasm)) {
		// What the unit's manifest says only matters if the bytes are
		// cur's: an embedded one is read from them.
		if man = kept(stamp); man == nil {
			man, err = PluginManifest(f.wasm, cur.wasm)
		}
		if err == nil {
			ready = m.instanceAhead(f, cur, man)
		}
	}
	if cur != nil && fileHolds(f.wasm, cur.wasm) {
		// Written again, the same: compared as it is read, without a copy.
		wasm = cur.wasm
		if ready != nil {
			ready.decide(true)
			return unitModule{wasm: wasm, stamp: stamp, man: ready.man, ready: ready}
		}
		if man == nil || err != nil {
			man, err = PluginManifest(f.wasm, wasm)
		}
	} else {
		if ready != nil {
			ready.decide(false) // it closes its instance
		}
		man, wasm, err = f.read()
	}
	if err != nil {
		return unitModule{}
	}
	read := unitModule{wasm: wasm, stamp: stamp, man: man}
	auth, err := m.authorize(man, f.folder)
	if err != nil || m.cfg.Overrides[man.Plugin.Name].Disabled() {
		return read
	}
	opts := m.options(auth.plugin, f.folder.Builtin, nil)
	opts.defaults()
	if cur.fits(wasm, &opts) {
		read.wasm = cur.wasm // the same bytes: one copy, told at once
		return read
	}
	if mod, err := m.cfg.Engine.Prepare(m.ctx, wasm, opts); err == nil {
		read.hints, read.wasm = []*Module{mod}, mod.wasm
	}
	return read
}

// keptManifest is the manifest a unit read, as the stamp of its files then
// was, for a rescan to take again while the manifest file it was read
// from has the same size and time (readFiles does the same for a
// restart); nil when the manifest was embedded in the module, or its file
// changed since.
func keptManifest(man *manifests.Plugin, then fileStamp) func(now fileStamp) *manifests.Plugin {
	return func(now fileStamp) *manifests.Plugin {
		if man == nil || then.tomlTime.IsZero() || now.tomlSize != then.tomlSize || !now.tomlTime.Equal(then.tomlTime) {
			return nil
		}
		return man
	}
}

// takeHeld hands what was held for the plugin name to its new unit, and
// the module file as the rescan read it.
func (m *Manager) takeHeld(name string) unitModule {
	m.hintMu.Lock()
	defer m.hintMu.Unlock()
	h := m.hints[name]
	delete(m.hints, name)
	if h == nil {
		return unitModule{}
	}
	return *h
}

// dropHints lets go of the modules held for units that were not started
// again (their files were removed).
func (m *Manager) dropHints() {
	m.hintMu.Lock()
	hints := m.hints
	m.hints = nil
	m.hintMu.Unlock()
	for _, h := range hints {
		h.release()
	}
}

// fileHolds reports whether the file at path holds exactly want, reading it
// a piece at a time: a module written again the same is told without a
// copy of it. Like readModule it opens the file without blocking, and reads
// nothing but a regular file: a FIFO put in its place must not hold the
// rescan, and with it every other one and the manager's stop.
func fileHolds(path string, want []byte) bool {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() != int64(len(want)) {
		return false
	}
	bp := holdBufs.Get().(*[]byte)
	defer holdBufs.Put(bp)
	buf := *bp
	for len(want) > 0 {
		n, err := io.ReadFull(f, buf[:min(len(buf), len(want))])
		if err != nil || !bytes.Equal(buf[:n], want[:n]) {
			return false
		}
		want = want[n:]
	}
	n, _ := f.Read(buf[:1])
	return n == 0
}

// holdBufs are fileHolds' buffers, reused: allocating and clearing a new
// one took some 0.15 ms of a reload's CPU on a loaded machine.
var holdBufs = sync.Pool{New: func() any {
	b := make([]byte, 256<<10)
	return &b
}}

// readyInstance is an instance of the module a unit holds, made while the
// rescan that stops the unit compares the module file with the module's
// bytes: a file written again the same — what a rebuild does — then
// finds its instance made, and initialised once the compare said so,
// while the old unit stopped. Until its unit serves it, nothing reaches
// it: it gets no batch, and its calls and publishes outside a batch are
// refused (imports.go), so a guest's init has no effect but its logs. The
// options are those the unit's start would give it, from the manifest
// and grants the rescan read.
type readyInstance struct {
	man    *manifests.Plugin
	auth   *authority
	grants *Grants
	opts   InstanceConfig
	to     atomic.Pointer[unit] // the unit its grants report refusals to

	same chan bool     // the compare's verdict
	done chan struct{} // closed once p, info and err are set
	p    *Plugin
	info abi.PluginInfo
	err  error // of the instantiation, or of init with p set
}

// instanceAhead starts an instance of cur for the plugin files f, whose
// manifest reads man, as the unit's start would make it; or returns nil
// when the files would not start one (a manifest that does not
// authorize, a plugin disabled, options cur was not prepared for).
func (m *Manager) instanceAhead(f pluginFiles, cur *Module, man *manifests.Plugin) *readyInstance {
	auth, err := m.authorize(man, f.folder)
	if err != nil || m.cfg.Overrides[man.Plugin.Name].Disabled() {
		return nil
	}
	r := &readyInstance{man: man, auth: auth, same: make(chan bool, 1), done: make(chan struct{})}
	r.grants = auth.grants(r.deny)
	r.opts = m.options(auth.plugin, f.folder.Builtin, r.grants)
	want := r.opts
	want.defaults()
	if !cur.fits(cur.wasm, &want) {
		return nil
	}
	cur.retain() // the instance takes its own once it is made
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(r.done)
		p, err := cur.Instantiate(m.ctx, r.opts)
		cur.Release()
		same := false
		select {
		case same = <-r.same:
		case <-m.ctx.Done():
		}
		if err != nil || !same {
			if p != nil {
				_ = p.Close(context.Background())
			}
			r.err = cmp.Or(err, errNotSame)
			return
		}
		r.p = p
		r.info, r.err = p.Init(m.ctx, abi.PluginConfig{Config: auth.plugin.Config})
	}()
	return r
}

// errNotSame is the error of a ready instance whose bytes the file no
// longer holds.
var errNotSame = errors.New("the module file changed")

// decide gives the compare's verdict.
func (r *readyInstance) decide(same bool) { r.same <- same }

// deny reports a refusal to the unit that took the instance.
func (r *readyInstance) deny(d Denial) {
	if u := r.to.Load(); u != nil {
		u.onDenied(d)
	}
}

// take waits for the instance and returns it, initialised (info), or the
// error of its instantiation (p nil) or of its init (p set, to be closed).
func (r *readyInstance) take() (p *Plugin, info abi.PluginInfo, err error) {
	<-r.done
	p, r.p = r.p, nil
	return p, r.info, r.err
}

// discard closes the instance if no unit took it.
func (r *readyInstance) discard() {
	if r == nil {
		return
	}
	if p, _, _ := r.take(); p != nil {
		_ = p.Close(context.Background())
	}
}
