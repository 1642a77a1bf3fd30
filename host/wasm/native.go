package wasm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sdk/plugin"
)

// A plugin built into the host (plugin.Builtin) runs as a Native: no
// module and no compiler, so it is serving microseconds after it is
// asked to, but its calls cross the same encoded messages, the same caps
// and the same grant checks as a module's — only the walls differ. Its
// memory is the host's and nothing stops a call that does not return, so
// it runs trusted, as the modules of a built-in folder do; a panic stops
// it as a trap stops a module. See
// docs/RATIONALE.md#built-in-plugins-are-native.

// LoadNative starts the built-in plugin b with opts: a fresh plugin of its
// constructor, which reaches the host through p's imports.
func (e *Engine) LoadNative(ctx context.Context, b plugin.Builtin, opts InstanceConfig) (*Plugin, error) {
	opts.Trusted = true
	opts.defaults()
	p := &Plugin{opts: opts, logger: e.logger.With("plugin", opts.Name)}
	if g := opts.Grants; g != nil {
		// A native plugin imports everything: its grants are checked at
		// each use, as a drop-in's are.
		if err := g.compile(); err != nil {
			return nil, &Failure{Plugin: opts.Name, Op: "load", Reason: ReasonRefused, Err: err}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.runNative(func() { p.native = plugin.NewNative(b.New, nativeImports{p}) }); err != nil {
		return nil, p.stop(ctx, "load", ReasonTrap, err)
	}
	return p, nil
}

// nativeTrip is roundTrip for a native plugin: it passes data to the
// plugin's op and returns a copy of its answer, which the plugin reuses.
func (p *Plugin) nativeTrip(ctx context.Context, op string, data []byte, out *Output) ([]byte, error) {
	p.out, p.importErr, p.logLines, p.hostBytes, p.throttle = out, nil, 0, 0, throttleCounts{}
	p.stderr.Reset()
	var raw []byte
	err := p.runNative(func() {
		if op == "init" {
			raw = p.native.Init(data)
		} else {
			raw = p.native.Handle(data)
		}
	})
	p.out = nil
	if out != nil && p.throttle != (throttleCounts{}) {
		out.Throttled = p.throttle.caps(&p.opts)
	}
	// An import refuses a native plugin only for a cap (overCap); it
	// reads no guest memory, so no range can be bad.
	var c *CapError
	switch {
	case err == nil:
	case errors.As(err, &c):
		return nil, p.stop(ctx, op, ReasonLimit, err)
	default:
		return nil, p.stop(ctx, op, ReasonTrap, err)
	}
	if len(raw) > int(p.opts.MaxOutput) {
		return nil, p.stop(ctx, op, ReasonLimit, &CapError{What: "output", Got: int64(len(raw)), Max: int64(p.opts.MaxOutput), Unit: "bytes", Cap: "InstanceConfig.MaxOutput"})
	}
	if err := p.charge("the output", len(raw)); err != nil {
		return nil, p.stop(ctx, op, ReasonLimit, err)
	}
	return bytes.Clone(raw), nil
}

// runNative runs fn, the plugin's code, and turns its panic into an error:
// an import's refusal (importErr) as it is, any other with the stack, which
// the Failure keeps as a module's stderr.
func (p *Plugin) runNative(fn func()) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if p.importErr != nil {
			err = p.importErr
			return
		}
		fmt.Fprintf(&p.stderr, "panic: %v\n\n%s", r, debug.Stack())
		err = fmt.Errorf("the built-in plugin panicked: %v", r)
	}()
	fn()
	return nil
}

// nativeImports are the host imports as a native plugin calls them: the
// wasm imports' own checks, on the plugin's own bytes.
type nativeImports struct{ p *Plugin }

func (n nativeImports) Call(method string, args []byte) int64 {
	return n.p.importCall(method, args)
}

func (n nativeImports) Publish(event []byte) int32 { return n.p.importPublish(event) }

func (n nativeImports) Log(level int32, msg []byte) {
	n.p.importLog(context.Background(), level, msg)
}

func (n nativeImports) Now() int64 { return n.p.now }

// read reads the plugin's manifest and module; a built-in plugin has no
// module, and its manifest is the one compiled in.
func (f pluginFiles) read() (*manifests.Plugin, []byte, error) {
	if f.native != nil {
		man, err := manifests.ParsePlugin("a built-in plugin's manifest", f.native.Manifest)
		return man, nil, err
	}
	return ReadPlugin(f.wasm)
}

// load starts an instance of the unit's plugin: its module's, or its
// built-in constructor's.
func (u *unit) load(ctx context.Context, wasm []byte, opts InstanceConfig) (*Plugin, error) {
	if b := u.files.native; b != nil {
		return u.m.cfg.Engine.LoadNative(ctx, *b, opts)
	}
	return u.m.cfg.Engine.Load(ctx, wasm, opts)
}
