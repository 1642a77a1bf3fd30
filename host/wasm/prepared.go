package wasm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host/internal/meter"
)

// A plugin module is prepared once and instantiated many times. Preparing
// is the costly part — the meter's rewrite (or the merge of a trusted
// module's data), wazero's decoding and validation of some 4 MB, its
// compilation or the read of its compilation cache, and the host modules —
// so a Module keeps all of it: a runtime of its own holding the compiled
// guest, WASI and the host modules. An instance (a Plugin) is then wazero
// instantiating the guest in that runtime and running its _initialize,
// which is what a restart after a failure and a hot reload of the same
// bytes pay.
//
// The engine keeps its modules in a table keyed by the SHA-256 of the bytes
// and the options that change what is compiled (trusted or not, the memory
// limit), counted by reference: every instance holds its module, and so
// does a unit (unit_module.go) from its first start to its stop, so the
// module outlives the instances that fail. The last release leaves it idle:
// the engine keeps idleKeep such modules, the last released, for bytes that
// come back (a version put back), and closes the others — the compiled
// module, which wazero's engine would otherwise keep for good, and the
// runtime. An instance's failure closes only its own guest instance: the
// next one has fresh memory.
//
// The host modules of a Module serve all its instances: each function
// finds the Plugin it serves by the name of the guest instance calling it
// (one name per live instance of a runtime, as wazero requires).

// moduleKey is what a prepared module is for: its bytes, and the options
// that change its compilation. The deadline enforcement (the meter, or
// wazero's close-on-context-done when the meter cannot rewrite the module)
// follows from the bytes and Trusted.
type moduleKey struct {
	sum     [sha256.Size]byte
	trusted bool
	pages   uint32
}

// Module is a plugin module prepared for instances: compiled, checked,
// in a runtime with [WASI] and the host modules. [Engine.Prepare] returns it
// held; Release it when done. Any number of instances may be made of it
// at once.
type Module struct {
	engine   *Engine
	key      moduleKey
	wasm     []byte // the bytes it was prepared from: the same bytes are told without hashing them
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	metered  bool

	refs      int // under h.pmu
	closeOnce sync.Once
	mem       memoryPool // the memory of its last closed instance, for the next

	// live are the instances by their guest's module name, read by the host
	// functions on every call without a lock; written under lmu.
	lmu  sync.Mutex
	live atomic.Pointer[map[string]*Plugin]
	seq  int // names an instance whose plugin's name is taken
}

// errNoInstance is the trap of a host function called by a guest instance
// the module does not know: none of the host's own.
var errNoInstance = errors.New("no plugin instance of this module is calling")

// plugin is the instance a host function serves.
func (mod *Module) plugin(g api.Module) *Plugin {
	if p := (*mod.live.Load())[g.Name()]; p != nil {
		return p
	}
	panic(errNoInstance)
}

// register names p's guest instance: the plugin's name, unless another
// live instance of the module has it.
func (mod *Module) register(want string, p *Plugin) string {
	mod.lmu.Lock()
	defer mod.lmu.Unlock()
	live := *mod.live.Load()
	name := want
	for live[name] != nil {
		mod.seq++
		name = want + "#" + strconv.Itoa(mod.seq)
	}
	next := maps.Clone(live)
	next[name] = p
	mod.live.Store(&next)
	return name
}

func (mod *Module) unregister(name string) {
	mod.lmu.Lock()
	defer mod.lmu.Unlock()
	next := maps.Clone(*mod.live.Load())
	delete(next, name)
	mod.live.Store(&next)
}

// fits reports whether mod was prepared from wasm for opts (defaulted).
func (mod *Module) fits(wasm []byte, opts *InstanceConfig) bool {
	if mod == nil || mod.key.trusted != opts.Trusted || mod.key.pages != opts.MemoryPages || len(mod.wasm) != len(wasm) {
		return false
	}
	return len(wasm) == 0 || &mod.wasm[0] == &wasm[0] || bytes.Equal(mod.wasm, wasm)
}

// retain takes one more reference to mod.
func (mod *Module) retain() {
	mod.engine.pmu.Lock()
	mod.refs++
	mod.engine.pmu.Unlock()
}

// Release gives back a reference; after the last the module is idle, kept
// for its bytes coming back until idleKeep others are released after it,
// then closed. A nil [Module] is released as nothing.
func (mod *Module) Release() {
	if mod == nil {
		return
	}
	e := mod.engine
	e.pmu.Lock()
	mod.refs--
	unheld := mod.refs == 0
	var evict *Module
	if unheld {
		evict = mod
		if e.modules[mod.key] == mod && !e.shut {
			delete(e.modules, mod.key)
			// Kept idle, in case the bytes come back: a version put back.
			e.idle = append(e.idle, mod)
			evict = nil
			if len(e.idle) > idleKeep {
				evict = e.idle[0]
				e.idle = slices.Delete(e.idle, 0, 1)
			}
		}
	}
	e.pmu.Unlock()
	if unheld && evict != mod {
		mod.mem.drain(false) // no instance to come soon
	}
	if evict != nil {
		evict.close()
	}
}

// idleKeep is how many modules no instance or unit holds the engine keeps,
// the last released: a plugin whose file is put back to its previous
// version gets the module it had. Each costs its compiled code, some tens
// of MiB for a Go plugin, so only one.
const idleKeep = 1

// close closes the compiled module — the engine's copy, which wazero keeps
// until then, counted per compilation — and the runtime, once.
func (mod *Module) close() {
	mod.closeOnce.Do(func() {
		mod.mem.drain(true)
		ctx := context.Background()
		_ = mod.compiled.Close(ctx)
		_ = mod.rt.Close(ctx)
	})
}

// LiveModules counts the modules the engine keeps prepared: those some
// instance or unit holds, and idle, those it keeps for their bytes coming
// back (at most idleKeep).
func (e *Engine) LiveModules() (held, idle int) {
	e.pmu.Lock()
	defer e.pmu.Unlock()
	return len(e.modules), len(e.idle)
}

// compileCount counts the modules the engine prepared since [NewEngine].
func (e *Engine) compileCount() int {
	e.pmu.Lock()
	defer e.pmu.Unlock()
	return e.compiles
}

// Prepare returns the module wasm prepared for opts, held: the one the
// engine keeps for the same bytes and options, or a new one, compiled (or
// read from the compilation cache), checked and given its host modules.
// Preparations of the same module at once wait for the first.
func (e *Engine) Prepare(ctx context.Context, wasm []byte, opts InstanceConfig) (*Module, error) {
	opts.defaults()
	if err := checkModuleCaps(wasm); err != nil {
		return nil, refusal(&opts, err)
	}
	key := moduleKey{sum: sha256.Sum256(wasm), trusted: opts.Trusted, pages: opts.MemoryPages}
	var mine chan struct{}
	for mine == nil {
		e.pmu.Lock()
		if e.shut {
			e.pmu.Unlock()
			return nil, fmt.Errorf("plugin %s: the plugin engine is closed", opts.Name)
		}
		if mod := e.modules[key]; mod != nil {
			mod.refs++
			e.pmu.Unlock()
			return mod, nil
		}
		if i := slices.IndexFunc(e.idle, func(m *Module) bool { return m.key == key }); i >= 0 {
			mod := e.idle[i]
			e.idle = slices.Delete(e.idle, i, i+1)
			mod.refs = 1
			e.modules[key] = mod
			e.pmu.Unlock()
			return mod, nil
		}
		wait, busy := e.preparing[key]
		if !busy {
			if e.modules == nil {
				e.preparing, e.modules = map[moduleKey]chan struct{}{}, map[moduleKey]*Module{}
			}
			mine = make(chan struct{})
			e.preparing[key] = mine
		}
		e.pmu.Unlock()
		if busy {
			select {
			case <-wait:
			case <-ctx.Done():
				return nil, fmt.Errorf("plugin %s: %w", opts.Name, context.Cause(ctx))
			}
		}
	}

	mod, err := e.prepare(ctx, wasm, &opts)
	e.pmu.Lock()
	delete(e.preparing, key)
	close(mine)
	if err == nil {
		if e.shut {
			err = fmt.Errorf("plugin %s: the plugin engine is closed", opts.Name)
		} else {
			mod.key, mod.refs = key, 1
			e.modules[key] = mod
			e.compiles++
		}
	}
	e.pmu.Unlock()
	if err != nil {
		if mod != nil {
			mod.close()
		}
		return nil, err
	}
	return mod, nil
}

// refusal is the Failure of a module the host will not run.
func refusal(opts *InstanceConfig, err error) error {
	return &Failure{Plugin: opts.Name, Op: "load", Reason: ReasonRefused, Err: err}
}

// prepare compiles wasm for opts and readies its runtime: the checks of
// its imports and exports, WASI, and the host modules.
func (e *Engine) prepare(ctx context.Context, wasm []byte, opts *InstanceConfig) (*Module, error) {
	rt, compiled, metered, data, err := e.compileData(ctx, wasm, opts)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("plugin %s: %w", opts.Name, err)
	}
	if err != nil {
		return nil, refusal(opts, fmt.Errorf("not a valid WebAssembly module: %w", err))
	}
	// A copy: the caller's bytes may change; the unit that prepared it
	// takes this copy for its own (unit.module).
	mod := &Module{engine: e, wasm: bytes.Clone(wasm), rt: rt, compiled: compiled, metered: metered}
	mod.mem.written(data)
	mod.live.Store(&map[string]*Plugin{})
	if err := checkImports(compiled, metered); err != nil {
		return mod, refusal(opts, err)
	}
	if err := checkExports(compiled); err != nil {
		return mod, refusal(opts, err)
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return mod, fmt.Errorf("plugin %s: WASI: %w", opts.Name, err)
	}
	if err := mod.instantiateHost(ctx); err != nil {
		return mod, fmt.Errorf("plugin %s: host module: %w", opts.Name, err)
	}
	return mod, nil
}

// instantiateHost instantiates the host module, "kairo", and for a metered
// module the meter's, kairo_meter, in mod's runtime: each function serves
// the instance that calls it.
func (mod *Module) instantiateHost(ctx context.Context) error {
	b := mod.rt.NewHostModuleBuilder(abi.HostModule)
	for name, f := range hostFuncs {
		fn := f.fn
		b.NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, g api.Module, stack []uint64) {
				fn(mod.plugin(g), ctx, g, stack)
			}), f.params, f.results).
			Export(name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		return err
	}
	if !mod.metered {
		return nil
	}
	_, err := mod.rt.NewHostModuleBuilder(meter.ImportModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, g api.Module, stack []uint64) {
			mod.plugin(g).meterYield(ctx, g, stack)
		}), nil, []api.ValueType{api.ValueTypeI32}).
		Export(meter.ImportYield).
		Instantiate(ctx)
	return err
}
