package wasm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host/internal/meter"
	"github.com/kairo-os/kairo/sdk/plugin"
)

// EngineConfig configures an [Engine]. The zero value works: modules are
// compiled in memory only and the engine logs to [slog.Default].
type EngineConfig struct {
	// CacheDir keeps compiled modules on disk, so a restart does not pay
	// compilation again; it may be shared by every engine of one user (the
	// daemon's default is the user's cache folder). The engine makes it, mode
	// 0700, the first time it compiles, and uses it only when no one but
	// its user can write it or anything in it (CheckCache); otherwise it
	// says why, once, and compiles in memory. Empty keeps compiled modules
	// in memory only.
	CacheDir string
	Logger   *slog.Logger
}

// Engine loads and runs WebAssembly plugins. Each module it prepares
// (prepared.go) runs in a wazero runtime of its own, which its instances
// share — the options that make a runtime (the memory limit, the deadline
// enforcement) are part of what a module is prepared for; the runtimes
// share one compilation cache.
type Engine struct {
	cacheDir string
	memCache wazero.CompilationCache // in memory, when the disk fails
	logger   *slog.Logger
	// compiling bounds the modules compiled at once to the processors:
	// more only raise the peak of memory, not the pace.
	compiling chan struct{}

	cmu       sync.Mutex
	disk      wazero.CompilationCache // the cache in cacheDir, once opened
	refused   bool                    // cacheDir is not the user's own: never opened
	closed    bool
	diskUntil time.Time // the disk cache is not used before then

	// The prepared modules (prepared.go), by bytes and options, and those
	// being prepared; compiles counts the modules prepared since New.
	pmu       sync.Mutex
	modules   map[moduleKey]*Module
	idle      []*Module // released, kept for a while (idleKeep)
	preparing map[moduleKey]chan struct{}
	compiles  int
	shut      bool
}

// cacheRetry is how long the engine compiles in memory after the disk cache
// failed, before it tries the disk again.
const cacheRetry = time.Minute

// pickCache is the cache to compile with, and whether it is on disk. The
// first call opens the disk cache: makes its folder, checks it is the
// user's own (CheckCache), and says why it cannot be used when not.
func (e *Engine) pickCache() (wazero.CompilationCache, bool) {
	e.cmu.Lock()
	defer e.cmu.Unlock()
	if e.cacheDir == "" || e.refused || e.closed || time.Now().Before(e.diskUntil) {
		return e.memCache, false
	}
	if e.disk == nil {
		err := OpenCache(e.cacheDir)
		var c wazero.CompilationCache
		if err == nil {
			c, err = wazero.NewCompilationCacheWithDir(e.cacheDir)
		}
		var refused *CacheError
		switch {
		case errors.As(err, &refused):
			e.refused = true
			e.logger.Warn("plugins compile in memory, at every start: "+err.Error(), "folder", e.cacheDir)
			return e.memCache, false
		case err != nil:
			e.failedLocked(err)
			return e.memCache, false
		}
		e.disk = c
	}
	return e.disk, true
}

// cacheFailed notes that the disk cache could not take a module that
// compiles in memory.
func (e *Engine) cacheFailed(err error) {
	e.cmu.Lock()
	defer e.cmu.Unlock()
	e.failedLocked(err)
}

func (e *Engine) failedLocked(err error) {
	e.diskUntil = time.Now().Add(cacheRetry)
	e.logger.Warn("the compilation cache could not be written (is its disk full?): compiling in memory, which a restart pays again; the cache is tried again in a minute",
		"folder", e.cacheDir, "err", err)
}

// NewEngine returns an [Engine]. Close it to release the compilation cache.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	e := &Engine{logger: cfg.Logger, cacheDir: cfg.CacheDir, compiling: make(chan struct{}, runtime.GOMAXPROCS(0))}
	if e.logger == nil {
		e.logger = slog.Default()
	}
	e.memCache = wazero.NewCompilationCache()
	return e, nil
}

// Close releases the prepared modules and the compilation cache. Close the
// plugins first.
func (e *Engine) Close(ctx context.Context) error {
	e.pmu.Lock()
	e.shut = true
	mods := append(slices.Collect(maps.Values(e.modules)), e.idle...)
	clear(e.modules)
	e.idle = nil
	e.pmu.Unlock()
	for _, mod := range mods {
		mod.close()
	}
	err := e.memCache.Close(ctx)
	e.cmu.Lock()
	defer e.cmu.Unlock()
	e.closed = true
	if e.disk != nil {
		err = errors.Join(err, e.disk.Close(ctx))
	}
	return err
}

// InstanceConfig configures one plugin instance. Zero fields take the
// defaults below.
type InstanceConfig struct {
	// Name names the plugin in errors and logs until Init says its name.
	Name string
	// Trusted runs the plugin without deadline enforcement: a little
	// faster (about half a microsecond a call), but a plugin that loops
	// hangs its caller, and, as native code never yields to the Go
	// runtime, holds off every garbage collection of the process until it
	// returns. For built-ins, or by the operator's explicit choice.
	Trusted bool
	// Deadline bounds each Handle; default 1 s.
	Deadline time.Duration
	// StartDeadline bounds _initialize and Init; default 5 s.
	StartDeadline time.Duration
	// MemoryPages caps the guest memory, in 64 KiB pages; default 1024
	// (64 MiB).
	MemoryPages uint32
	// MaxOutput caps the bytes of one init or handle output; default 4 MiB.
	MaxOutput uint32
	// MaxCalls and MaxPublishes cap the call and publish imports per batch;
	// default 256 and 1024. Past them the import returns abi.ErrnoBusy and
	// the batch's Output counts it in Throttled.
	MaxCalls, MaxPublishes int
	// MaxCallArgs caps the bytes of one call's arguments; default 1 MiB.
	MaxCallArgs int
	// MaxActions caps each list of a reply (actions, tool results, service
	// results), counted before any is decoded; default 1024.
	MaxActions int
	// MaxBatchBytes caps what the host copies out of the guest in one
	// batch — call arguments, published events and the output — so what
	// the plugin makes the host hold is charged to it: default a quarter
	// of its memory limit, at least 1 MiB.
	MaxBatchBytes int
	// Past MaxOutput, MaxCallArgs, MaxActions, MaxBatchBytes and the bus's
	// MaxEventData the instance is stopped with ReasonLimit.
	// Grants are the methods the plugin may call and the subjects it may
	// publish on; nil grants everything (see Grants).
	Grants *Grants
	// WASI is what the plugin reaches through WASI: no files and no
	// environment unless it lists them.
	WASI WASI
	// BusHost is the name of the host the plugin runs for (the bus's
	// Config.Host): on a store several hosts share, what a plugin makes
	// of another host's events is never this host's operator's word.
	BusHost string
}

func (o *InstanceConfig) defaults() {
	if o.Name == "" {
		o.Name = "unnamed"
	}
	if o.Deadline <= 0 {
		o.Deadline = time.Second
	}
	if o.StartDeadline <= 0 {
		o.StartDeadline = 5 * time.Second
	}
	if o.MemoryPages == 0 {
		o.MemoryPages = 1024
	}
	if o.MaxOutput == 0 {
		o.MaxOutput = 4 << 20
	}
	if o.MaxCalls <= 0 {
		o.MaxCalls = 256
	}
	if o.MaxPublishes <= 0 {
		o.MaxPublishes = 1024
	}
	if o.MaxCallArgs <= 0 {
		o.MaxCallArgs = 1 << 20
	}
	if o.MaxActions <= 0 {
		o.MaxActions = 1024
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = max(1<<20, int(o.MemoryPages)*(64<<10)/4)
	}
}

// Output is what one Handle produced: the plugin's reply, and what it
// published and called through the host imports while it ran.
type Output struct {
	Reply     abi.Reply
	Published []abi.Event
	Calls     []Call
	// Throttled counts what the batch asked past the caps that refuse
	// without stopping the plugin (calls, publishes, log lines); nil when
	// nothing was.
	Throttled []abi.PluginCap
}

// Call is one call import: the method and args the plugin asked for, and the
// token its [abi.CallResult] must carry in a later batch.
type Call struct {
	Token  int64
	Method string
	Args   msgpack.RawMessage
}

// Plugin is one loaded instance of a plugin module. Its methods may be
// called from several goroutines; calls run one at a time. Once a call
// fails the instance is stopped and every later call returns its [Failure].
type Plugin struct {
	opts   InstanceConfig
	logger *slog.Logger
	rt     wazero.Runtime
	mod    api.Module
	input  api.Function
	init   api.Function
	handle api.Function
	stderr stderrBuffer
	// native is the plugin when it is built into the host (native.go):
	// then there is no runtime and no module.
	native *plugin.Native

	// module is what rt and mod are an instance of (prepared.go), held
	// until Close; modName is mod's name in rt; closed is set by Close.
	module  *Module
	modName string
	closed  atomic.Bool

	mu     sync.Mutex
	failed *Failure
	stack  [1]uint64
	inBuf  []byte // the encoded batch, reused from call to call

	// The deadline of an untrusted instance's calls (meter.go): one timer,
	// armed around each call, calls expire, which records the cause in
	// stopped, zeroes the fuel of a metered guest and closes expired, which
	// is what dctx reports as Done. No context, timer or goroutine of the
	// host's is made per call. stopped is set once and never cleared: an
	// instance whose call was stopped never serves again.
	metered bool
	fuel    api.MutableGlobal
	timer   *time.Timer
	expired chan struct{}
	stopped atomic.Pointer[error]
	dctx    deadlineCtx

	// State of the call in progress, read by the host imports.
	now       int64
	writer    string // of the batch in hand, "" when vouched for (writer.go)
	out       *Output
	nextToken int64
	logLines  int
	importErr error
	hostBytes int // copied out of the guest in this batch (MaxBatchBytes)
	throttle  throttleCounts
}

// Load prepares the module ([Engine.Prepare]: compiled, or the one the engine
// keeps for the same bytes and options) and makes an instance of it
// ([Module.Instantiate]).
func (e *Engine) Load(ctx context.Context, wasm []byte, opts InstanceConfig) (*Plugin, error) {
	mod, err := e.Prepare(ctx, wasm, opts)
	if err != nil {
		return nil, err
	}
	defer mod.Release()
	return mod.Instantiate(ctx, opts)
}

// Instantiate makes an instance of the module, which holds the module
// until it is closed: checks its imports against opts.Grants, instantiates
// it with [WASI] (no files, no environment unless opts.WASI lists them) and
// runs _initialize. opts must be what the module was prepared for:
// Trusted and MemoryPages; the rest are the instance's own.
func (mod *Module) Instantiate(ctx context.Context, opts InstanceConfig) (*Plugin, error) {
	opts.defaults()
	if opts.Trusted != mod.key.trusted || opts.MemoryPages != mod.key.pages {
		return nil, fmt.Errorf("plugin %s: the module was prepared for other options (trusted %v, %d memory pages)", opts.Name, mod.key.trusted, mod.key.pages)
	}
	h := mod.engine
	p := &Plugin{opts: opts, logger: h.logger.With("plugin", opts.Name)}
	if !opts.Trusted {
		p.expired = make(chan struct{})
		p.dctx.done = p.expired
		p.timer = time.AfterFunc(time.Hour, func() { p.expire(errDeadlinePassed) })
		p.timer.Stop()
	}
	refuse := func(err error) error { return refusal(&opts, err) }
	if err := opts.Grants.checkImports(mod.compiled); err != nil {
		return nil, refuse(err)
	}
	mod.retain()
	p.module, p.rt, p.metered = mod, mod.rt, mod.metered
	p.modName = mod.register(opts.Name, p)
	ok := false
	defer func() {
		if !ok {
			_ = p.Close(context.Background())
		}
	}()
	// No start functions: _initialize runs below, under the start deadline.
	mcfg := wazero.NewModuleConfig().WithName(p.modName).WithStartFunctions().
		WithStderr(&p.stderr).WithStdout(&p.stderr)
	mcfg = opts.WASI.apply(mcfg)
	// A module's start function (its start section, unlike _initialize)
	// runs within InstantiateModule: under the start deadline too.
	ictx, unwatch := p.arm(ctx, opts.StartDeadline)
	var err error
	p.mod, err = p.rt.InstantiateModule(experimental.WithMemoryAllocator(ictx, mod.mem.allocator()), mod.compiled, mcfg)
	if p.disarm(unwatch) {
		return nil, &Failure{Plugin: opts.Name, Op: "load", Reason: ReasonDeadline,
			Err: fmt.Errorf("its start function %w", p.stopCause(opts.StartDeadline, ctx))}
	}
	if err != nil {
		return nil, refuse(err)
	}
	if p.metered {
		fuel, ok := p.mod.ExportedGlobal(meter.ExportFuel).(api.MutableGlobal)
		if !ok {
			return nil, fmt.Errorf("plugin %s: the metered module exports no mutable %s", opts.Name, meter.ExportFuel)
		}
		p.fuel = fuel
	}
	p.input = p.mod.ExportedFunction(abi.ExportInput)
	p.init = p.mod.ExportedFunction(abi.ExportInit)
	p.handle = p.mod.ExportedFunction(abi.ExportHandle)

	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.callRaw(ctx, abi.ExportInitialize, p.mod.ExportedFunction(abi.ExportInitialize), opts.StartDeadline); err != nil {
		return nil, err
	}
	if err := p.callRaw(ctx, abi.ExportABIVersion, p.mod.ExportedFunction(abi.ExportABIVersion), opts.StartDeadline); err != nil {
		return nil, err
	}
	if v := int32(p.stack[0]); v != abi.PluginABIVersion {
		return nil, refuse(fmt.Errorf("the module speaks plugin ABI version %d; this host speaks version %d: rebuild the plugin with a matching SDK", v, abi.PluginABIVersion))
	}
	ok = true
	return p, nil
}

// Init passes the plugin its config and returns what the plugin says it is.
func (p *Plugin) Init(ctx context.Context, config abi.PluginConfig) (abi.PluginInfo, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed != nil {
		return abi.PluginInfo{}, fmt.Errorf("%w: %w", ErrStopped, p.failed)
	}
	in, err := msgpack.Marshal(&config)
	if err != nil {
		return abi.PluginInfo{}, fmt.Errorf("plugin %s: init: encode config: %w", p.opts.Name, err)
	}
	raw, err := p.roundTrip(ctx, "init", p.init, p.opts.StartDeadline, in, nil)
	if err != nil {
		return abi.PluginInfo{}, err
	}
	// The config and the result cross once, so they keep the reflection
	// codec; CheckMsgpack first, so a forged length cannot make it allocate.
	var res abi.InitResult
	if err := abi.CheckMsgpack(raw); err != nil {
		return abi.PluginInfo{}, p.stop(ctx, "init", ReasonBadOutput, fmt.Errorf("output is not a valid MsgPack %T: %w", res, err))
	}
	if err := msgpack.Unmarshal(raw, &res); err != nil {
		return abi.PluginInfo{}, p.stop(ctx, "init", ReasonBadOutput, fmt.Errorf("output is not a valid MsgPack %T: %w", res, err))
	}
	if res.Error != "" {
		return res.Info, p.stop(ctx, "init", ReasonInit, errors.New(res.Error))
	}
	return res.Info, nil
}

// Handle passes the plugin one batch and returns its reply and what it
// published and called meanwhile. The imports see batch.Time as now.
func (p *Plugin) Handle(ctx context.Context, batch *abi.Batch) (Output, error) {
	return p.handleAs(ctx, batch, "")
}

// handleAs is Handle for a batch of writer (writer.go); "" makes it the
// batch's events' own.
func (p *Plugin) handleAs(ctx context.Context, batch *abi.Batch, writer string) (Output, error) {
	if writer == "" {
		writer = batchWriter(batch, p.opts.BusHost)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out Output
	if p.failed != nil {
		return out, fmt.Errorf("%w: %w", ErrStopped, p.failed)
	}
	p.writer = writer
	defer func() { p.writer = "" }()
	p.now = batch.Time.UnixNano()
	p.inBuf = abi.AppendBatch(p.inBuf[:0], batch)
	raw, err := p.roundTrip(ctx, "handle", p.handle, p.opts.Deadline, p.inBuf, &out)
	if err != nil {
		return out, err
	}
	if err := checkReplyCounts(raw, p.opts.MaxActions); err != nil {
		return out, p.stop(ctx, "handle", ReasonLimit, err)
	}
	if err := abi.DecodeReply(raw, &out.Reply); err != nil {
		return out, p.stop(ctx, "handle", ReasonBadOutput, fmt.Errorf("output is not a valid MsgPack reply: %w", err))
	}
	return out, nil
}

// Err returns the [Failure] that stopped the instance, or nil while it serves.
func (p *Plugin) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed == nil {
		return nil
	}
	return p.failed
}

// Close stops the instance and releases its module, which the host closes
// once nothing else holds it.
func (p *Plugin) Close(ctx context.Context) error {
	if p.timer != nil {
		p.timer.Stop()
	}
	if p.module == nil || !p.closed.CompareAndSwap(false, true) {
		return nil // native, or closed already
	}
	// The instance alone: its module serves the next.
	var err error
	if p.mod != nil {
		err = p.mod.Close(ctx)
	}
	p.module.unregister(p.modName)
	p.module.Release()
	return err
}

// roundTrip writes data to the guest's input buffer, calls fn and returns a
// copy of its output: what is decoded from it aliases it, and the guest's
// memory changes with the next call. out, when set, collects the imports'
// work.
func (p *Plugin) roundTrip(ctx context.Context, op string, fn api.Function, deadline time.Duration, data []byte, out *Output) ([]byte, error) {
	if p.native != nil {
		return p.nativeTrip(ctx, op, data, out)
	}
	n := uint32(len(data))

	p.stack[0] = uint64(n)
	if err := p.callRaw(ctx, abi.ExportInput, p.input, deadline); err != nil {
		return nil, err
	}
	ptr := uint32(p.stack[0])
	if !p.mod.Memory().Write(ptr, data) {
		return nil, p.stop(ctx, op, ReasonBadPointer, &boundsError{abi.ExportInput + " returned a buffer that", ptr, n, p.mod.Memory().Size()})
	}

	p.out, p.importErr, p.logLines, p.hostBytes, p.throttle = out, nil, 0, 0, throttleCounts{}
	p.stack[0] = uint64(n)
	err := p.callRaw(ctx, op, fn, deadline)
	p.out = nil
	if out != nil && p.throttle != (throttleCounts{}) {
		out.Throttled = p.throttle.caps(&p.opts)
	}
	if err != nil {
		return nil, err
	}

	optr, on := abi.UnpackPtrLen(p.stack[0])
	if on > p.opts.MaxOutput {
		return nil, p.stop(ctx, op, ReasonLimit, &CapError{What: "output", Got: int64(on), Max: int64(p.opts.MaxOutput), Unit: "bytes", Cap: "InstanceConfig.MaxOutput"})
	}
	if err := p.charge("the output", int(on)); err != nil {
		return nil, p.stop(ctx, op, ReasonLimit, err)
	}
	view, ok := p.mod.Memory().Read(optr, on)
	if !ok {
		return nil, p.stop(ctx, op, ReasonBadPointer, &boundsError{"output", optr, on, p.mod.Memory().Size()})
	}
	return bytes.Clone(view), nil
}

// callRaw calls fn with p.stack, under deadline unless the plugin is
// trusted, and stops the instance when the call fails.
func (p *Plugin) callRaw(ctx context.Context, op string, fn api.Function, deadline time.Duration) error {
	caller := ctx
	ctx, unwatch := p.arm(ctx, deadline)
	p.stderr.Reset()
	err := fn.CallWithStack(ctx, p.stack[:])
	stopped := p.disarm(unwatch)
	if err == nil && !stopped {
		return nil
	}
	reason := ReasonTrap
	var exit *sys.ExitError
	var bounds *boundsError
	switch {
	case stopped:
		reason, err = ReasonDeadline, p.stopCause(deadline, caller)
	case p.importErr != nil:
		reason, err = ReasonBadPointer, p.importErr
		var c *CapError
		if errors.As(err, &c) {
			reason = ReasonLimit
		}
	case errors.As(err, &bounds):
		reason = ReasonBadPointer
	case errors.As(err, &exit):
		reason = ReasonExit
	}
	// A Go guest that cannot grow its memory says so on stderr, then traps
	// (or exits, as a command).
	if (reason == ReasonTrap || reason == ReasonExit) && strings.Contains(p.stderr.String(), "out of memory") {
		reason = ReasonMemory
		err = fmt.Errorf("the guest ran out of its %d memory pages: %w", p.opts.MemoryPages, err)
	}
	return p.stop(ctx, op, reason, err)
}

// stop records the failure and closes the instance; its memory may be in any
// state, so it is never called again.
func (p *Plugin) stop(ctx context.Context, op string, reason Reason, err error) error {
	p.failed = &Failure{Plugin: p.opts.Name, Op: op, Reason: reason, Err: err, Stderr: p.stderr.String()}
	if p.mod != nil {
		_ = p.mod.CloseWithExitCode(context.WithoutCancel(ctx), 1)
	}
	p.logger.Warn("plugin stopped", "op", op, "reason", reason, "err", err)
	return p.failed
}

// checkImports refuses a module that imports anything but WASI functions and
// the host module's functions, and, when metered, the meter's yield.
func checkImports(m wazero.CompiledModule, metered bool) error {
	for _, f := range m.ImportedFunctions() {
		mod, name, _ := f.Import()
		switch mod {
		case meter.ImportModule:
			// The rewriter refuses a module that imports from this name,
			// so only its own import is here.
			if !metered || name != meter.ImportYield {
				return fmt.Errorf("the module imports %s.%s, from a module name the host reserves", mod, name)
			}
		case wasi_snapshot_preview1.ModuleName:
			// wazero implements all of preview1; what a module may reach
			// through it is set by the module config.
		case abi.HostModule:
			if _, ok := hostFuncs[name]; !ok {
				return fmt.Errorf("the module imports %s.%s, which this host does not provide (it provides %s)", mod, name, hostFuncNames())
			}
		default:
			return fmt.Errorf("the module imports %s.%s from module %q, which this host does not provide (only %q and %q)", mod, name, mod, abi.HostModule, wasi_snapshot_preview1.ModuleName)
		}
	}
	for _, m := range m.ImportedMemories() {
		mod, name, _ := m.Import()
		return fmt.Errorf("the module imports memory %s.%s; a plugin must define its own", mod, name)
	}
	return nil
}

// exportSigs are the guest exports the ABI requires.
var exportSigs = []struct {
	name            string
	params, results []api.ValueType
}{
	{abi.ExportInitialize, nil, nil},
	{abi.ExportABIVersion, nil, []api.ValueType{api.ValueTypeI32}},
	{abi.ExportInput, []api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}},
	{abi.ExportInit, []api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}},
	{abi.ExportHandle, []api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}},
}

func checkExports(m wazero.CompiledModule) error {
	exports := m.ExportedFunctions()
	for _, want := range exportSigs {
		f, ok := exports[want.name]
		if !ok {
			return fmt.Errorf("the module does not export %s; a plugin exports %s (a Go plugin gets them from sdk/plugin, built with -buildmode=c-shared)", want.name, exportNames())
		}
		if !sameTypes(f.ParamTypes(), want.params) || !sameTypes(f.ResultTypes(), want.results) {
			return fmt.Errorf("the module exports %s with signature %s; the ABI wants %s", want.name, sig(f.ParamTypes(), f.ResultTypes()), sig(want.params, want.results))
		}
	}
	if len(m.ExportedMemories()) == 0 {
		return errors.New("the module exports no memory")
	}
	return nil
}

func exportNames() string {
	names := make([]string, len(exportSigs))
	for i, e := range exportSigs {
		names[i] = e.name
	}
	return strings.Join(names, ", ")
}

func sameTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sig(params, results []api.ValueType) string {
	name := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return strings.Join(s, ", ")
	}
	return "(" + name(params) + ") -> (" + name(results) + ")"
}

// stderrBuffer keeps the start and the end of what the guest wrote to its
// stderr during one call, 2 KiB of each: a Go guest's panic message comes
// first and its goroutine dump after.
type stderrBuffer struct {
	mu   sync.Mutex
	head []byte
	tail []byte
	cut  bool // bytes were dropped between head and tail
}

const stderrKeep = 2 << 10

func (t *stderrBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(b)
	if room := stderrKeep - len(t.head); room > 0 {
		k := min(room, len(b))
		t.head = append(t.head, b[:k]...)
		b = b[k:]
	}
	if len(b) > stderrKeep {
		b, t.cut = b[len(b)-stderrKeep:], true
	}
	if over := len(t.tail) + len(b) - stderrKeep; over > 0 {
		t.tail, t.cut = append(t.tail[:0], t.tail[over:]...), true
	}
	t.tail = append(t.tail, b...)
	return n, nil
}

func (t *stderrBuffer) Reset() {
	t.mu.Lock()
	t.head, t.tail, t.cut = t.head[:0], t.tail[:0], false
	t.mu.Unlock()
}

func (t *stderrBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cut {
		return string(t.head) + "\n[...]\n" + string(t.tail)
	}
	return string(t.head) + string(t.tail)
}
