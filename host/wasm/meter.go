package wasm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/kairo-os/kairo/host/internal/meter"
)

// Deadline enforcement for untrusted plugins
// (docs/RATIONALE.md#untrusted-guests-are-stopped-by-checks-in-their-code).
// The module is rewritten by internal/meter before it is compiled: every loop
// head and every function entry that needs one counts down a fuel global and,
// once per meterBudget checks, calls the host's kairo_meter.yield. The
// instance's deadline timer (or the caller's cancellation) sets the fuel to
// zero and marks the instance stopped, so the guest reaches yield at its next
// check and yield traps. A module the rewriter cannot read runs under
// wazero's WithCloseOnContextDone instead, never unenforced.

// meterBudget is how many checks a guest passes between two calls of yield.
// A call of yield leaves native code, which is when the Go runtime can take
// the thread back (for a stop-the-world, or to run the deadline timer); at a
// few nanoseconds per check it happens every few tens of microseconds, and
// the call, some 100 ns, costs well under 1%.
const meterBudget = 1 << 12

// errMeterStop is the panic of yield in a stopped instance; wazero makes it
// the error of the guest call.
var errMeterStop = errors.New("stopped by the host")

// errDeadlinePassed is the cause of a stop by the instance's own timer.
var errDeadlinePassed = errors.New("deadline passed")

// newRuntime returns the runtime of one instance.
func (e *Engine) newRuntime(ctx context.Context, cache wazero.CompilationCache, closeOnDone bool, pages uint32) wazero.Runtime {
	// No DWARF: Go modules carry none, and with it on wazero keeps a copy
	// of every custom section of every module it compiles.
	cfg := wazero.NewRuntimeConfig().
		WithCompilationCache(cache).
		WithCloseOnContextDone(closeOnDone).
		WithMemoryLimitPages(pages).
		WithDebugInfoEnabled(false)
	return wazero.NewRuntimeWithConfig(ctx, cfg)
}

// compileData returns a runtime, the module compiled in it (compileIn) and
// the spans of memory the module's data segments write (dataSpans), with
// the compilation cache on disk when there is one, as many at once as there
// are processors. A module the disk cache could not take is compiled again
// in memory: when that works, the cache's folder is full or unwritable, not
// the module bad, and the host compiles in memory for a while, saying which
// folder failed.
func (e *Engine) compileData(ctx context.Context, wasm []byte, opts *InstanceConfig) (rt wazero.Runtime, compiled wazero.CompiledModule, metered bool, data []memSpan, err error) {
	select {
	case e.compiling <- struct{}{}:
		defer func() { <-e.compiling }()
	case <-ctx.Done():
		return nil, nil, false, nil, context.Cause(ctx)
	}
	cache, onDisk := e.pickCache()
	rt, compiled, metered, data, err = e.compileIn(ctx, cache, wasm, opts)
	if err == nil || !onDisk {
		return rt, compiled, metered, data, err
	}
	rt2, compiled2, metered2, data2, err2 := e.compileIn(ctx, e.memCache, wasm, opts)
	if err2 != nil {
		return nil, nil, false, nil, err
	}
	e.cacheFailed(err)
	return rt2, compiled2, metered2, data2, nil
}

// compileIn returns a runtime and the module compiled in it: for an untrusted
// plugin the metered rewrite when the rewriter and wazero take it, else the
// module as given, under WithCloseOnContextDone; for a trusted one the module
// with its data segments merged. metered says which; data are the spans of
// memory the data segments of the module compiled write. The error is the
// original module's, as wazero words it.
func (e *Engine) compileIn(ctx context.Context, cache wazero.CompilationCache, wasm []byte, opts *InstanceConfig) (rt wazero.Runtime, compiled wazero.CompiledModule, metered bool, data []memSpan, err error) {
	var rerr error
	if !opts.Trusted {
		var rewritten []byte
		if rewritten, rerr = meter.Rewrite(wasm); rerr == nil {
			rt = e.newRuntime(ctx, cache, false, opts.MemoryPages)
			if compiled, err = compileModule(ctx, rt, rewritten); err == nil {
				return rt, compiled, true, dataSpans(rewritten), nil
			}
			_ = rt.Close(ctx)
			rerr = fmt.Errorf("wazero refused the rewritten module: %w", err)
		}
		defer func() {
			if err == nil {
				e.logger.Info("plugin deadline enforced by wazero's close-on-context-done, which is slower: the meter cannot rewrite the module",
					"plugin", opts.Name, "err", rerr)
			}
		}()
	}
	rt = e.newRuntime(ctx, cache, !opts.Trusted, opts.MemoryPages)
	if opts.Trusted {
		// Merging the data segments of a Go module saves the host a few
		// MiB of heap per instance and the load a few milliseconds.
		if compact, err := meter.Compact(wasm); err == nil {
			if compiled, err = compileModule(ctx, rt, compact); err == nil {
				return rt, compiled, false, dataSpans(compact), nil
			}
		}
	}
	if compiled, err = compileModule(ctx, rt, wasm); err != nil {
		_ = rt.Close(ctx)
		return nil, nil, false, nil, err
	}
	return rt, compiled, false, dataSpans(wasm), nil
}

// compileModule is rt.CompileModule, with a panic of wazero's turned into an
// error: its validator (v1.12) panics on some invalid modules, such as one
// declaring a function of a type it does not have, and a plugin file must not
// take the host down.
func compileModule(ctx context.Context, rt wazero.Runtime, wasm []byte) (compiled wazero.CompiledModule, err error) {
	defer func() {
		if v := recover(); v != nil {
			compiled, err = nil, fmt.Errorf("wazero panicked compiling it: %v", v)
		}
	}()
	return rt.CompileModule(ctx, wasm)
}

// meterYield is kairo_meter.yield: the next budget, or a trap once the
// instance is stopped.
func (p *Plugin) meterYield(_ context.Context, _ api.Module, stack []uint64) {
	if p.stopped.Load() != nil {
		panic(errMeterStop)
	}
	stack[0] = meterBudget
}

// expire stops the call in progress of an untrusted instance, once: it
// records why, sets the fuel of a metered guest to zero, and closes expired,
// which the call's context reports as Done (for the host functions, and for
// wazero when it enforces the deadline itself). It runs on the timer's or
// the caller context's goroutine.
func (p *Plugin) expire(cause error) {
	if !p.stopped.CompareAndSwap(nil, &cause) {
		return
	}
	if p.fuel != nil {
		p.fuel.Set(0)
	}
	close(p.expired)
}

// arm starts the deadline of a call to an untrusted guest and returns the
// call's context; a trusted guest's call keeps ctx. unwatch, when not nil,
// ends the watch on a caller's context that can be cancelled.
func (p *Plugin) arm(ctx context.Context, deadline time.Duration) (_ context.Context, unwatch func() bool) {
	if p.opts.Trusted {
		return ctx, nil
	}
	if ctx.Done() != nil {
		caller := ctx
		unwatch = context.AfterFunc(ctx, func() { p.expire(context.Cause(caller)) })
	}
	p.dctx.Context = ctx
	p.timer.Reset(deadline)
	return &p.dctx, unwatch
}

// disarm ends what arm started and reports whether the call was stopped. A
// timer or watch that fired as the call returned may be zeroing the fuel, or
// wazero closing the module, already: that instance cannot serve again
// either.
func (p *Plugin) disarm(unwatch func() bool) (stopped bool) {
	if p.opts.Trusted {
		return false
	}
	stopped = !p.timer.Stop()
	if unwatch != nil && !unwatch() {
		stopped = true
	}
	return stopped || p.stopped.Load() != nil
}

// stopCause words why a stopped call was stopped.
func (p *Plugin) stopCause(deadline time.Duration, caller context.Context) error {
	cause := errDeadlinePassed
	if c := p.stopped.Load(); c != nil {
		cause = *c
	} else if caller.Err() != nil {
		cause = context.Cause(caller)
	}
	if cause == errDeadlinePassed {
		return fmt.Errorf("stopped after its deadline of %v", deadline)
	}
	return fmt.Errorf("stopped: %w", cause)
}

// deadlineCtx is the context of a call to an untrusted guest: the caller's
// values, and Done once the instance's deadline timer fires or the caller
// cancels. The host functions see it; wazero, when it enforces the deadline
// itself, closes the module when Done closes.
type deadlineCtx struct {
	context.Context
	done <-chan struct{}
}

func (c *deadlineCtx) Done() <-chan struct{} { return c.done }

func (c *deadlineCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
