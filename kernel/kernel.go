// Package kernel is Kairo's system layer: the one method table that IPC
// clients and plugins both call, and the methods of its own on it — events
// (publish, subscribe, replay) on the bus of kernel/bus, processes (spawn,
// stdin, signal, attach) through the sessions of kernel/proc, devices, and
// the kernel's ping, introspection and metrics. IPC (kernel/ipc) and
// plugins (host/wasm) are two doors into this table, not two copies of it;
// the host registers its own methods (llm.chat, the tools) in it.
//
// A call carries the [Session] it came through, whose [Caller] says who calls:
// the kernel decides what a call may do from the Caller alone (its [Grants],
// its [SpawnAuthority]) and stamps the source of what it publishes from it.
package kernel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/kernel/secrets"
	"github.com/vmihailenco/msgpack/v5"
)

// Caller is who is calling: the principal a request acts for. The kernel
// decides what a request may do from its Caller alone, and stamps the
// source of what it publishes from it (Source); a caller never names
// itself.
type Caller struct {
	Kind Kind
	// Name is the skill, plugin or agent; for the host, its part ("mcp/fs").
	Name     string
	UID, GID uint32
	PID      int32
	// Grants, when set, narrow the caller to the methods and subjects
	// listed: a sandboxed skill on its IPC descriptor.
	Grants *Grants
	// Tree is the process tree a skill's connection belongs to: what the
	// skill spawns joins it (same uid, cgroup and run loop, killed with it).
	Tree *proc.Tree
	// Spawn bounds what the caller may start; nil is the operator's
	// authority (any manifest, any folder).
	Spawn *SpawnAuthority
}

// String names the caller for logs and errors: "operator pid P (uid U)",
// or its kind and name ("skill transcode").
func (c Caller) String() string {
	switch c.Kind {
	case KindOperator:
		if c.Name != "" { // a part of the daemon acting for the operator: "console"
			return fmt.Sprintf("operator %s pid %d (uid %d)", c.Name, c.PID, c.UID)
		}
		return fmt.Sprintf("operator pid %d (uid %d)", c.PID, c.UID)
	default:
		return string(c.Kind) + " " + c.Name
	}
}

// Source is what the kernel writes as the source of an event the caller
// publishes: its principal, "operator/UID", "skill/NAME", "plugin/NAME",
// "agent/ID" or "host/PART".
func (c Caller) Source() string {
	if c.Kind == KindOperator {
		return abi.PrincipalOperator + "/" + strconv.FormatUint(uint64(c.UID), 10)
	}
	return string(c.Kind) + "/" + c.Name
}

// Session is one caller's connection to the kernel: an IPC connection or a
// loaded plugin. What a session opens (subscriptions, processes) ends with it.
type Session interface {
	Caller() Caller
	// Context is done when the session ends.
	Context() context.Context
	// PushEvents sends events of subscription sub to the caller. It may block
	// while the caller is slow to read; that slows only this session.
	PushEvents(sub uint64, evs []abi.Event) error
	// PushChunks sends process output to the caller, blocking while it is
	// slow to read. The chunks' bytes are only valid during the call.
	PushChunks(cs []abi.StreamChunk) error
	// EndStream tells the caller that the stream its request id opened (a
	// subscription) ended with err, by a late response to that request.
	EndStream(id uint64, err *abi.Error) error
}

// Call is one method invocation.
type Call struct {
	Session   Session
	RequestID uint64
	Params    msgpack.RawMessage
}

// Handler implements a method. Its result is MsgPack-encoded for the caller;
// an [*abi.Error] reaches the caller as is, any other error as "internal".
type Handler func(ctx context.Context, c *Call) (any, error)

// Method is an entry of the method table.
type Method struct {
	Name    string
	Summary string
	Handler Handler
	// Quick methods return at once and never block, so a door may run them
	// on its reader instead of starting a goroutine per call.
	Quick bool
}

// Config configures a [Kernel].
type Config struct {
	Version string // reported by kernel.introspect
	// Host is this kernel's name among the hosts that share its store,
	// reported by kernel.introspect: its process ids are "pN@HOST", and a
	// call for another host's process says which host runs it. Empty: the
	// store is this host's alone, ids are "pN".
	Host     string
	Launcher proc.Launcher // how processes start; default proc.Exec
	Logger   *slog.Logger
	// ApprovalTimeout is how long an approval waits for a person before
	// it is denied; default DefaultApprovalTimeout.
	ApprovalTimeout time.Duration
	// Checkpoints is the folder of the checkpoints of the kernel's folds
	// (the approvals'), in the data folder; "": none, each start folds the
	// whole log (a log with no data folder).
	Checkpoints string
	// Secrets is the operator's secrets store, which the spawns whose
	// manifests name secrets are given them from; nil: none (such a spawn
	// is refused).
	Secrets *secrets.Store
	// Masker is the mask of the secrets given, shared with the parts of
	// the daemon that write elsewhere than the bus (its log file); nil:
	// the kernel makes its own.
	Masker *secrets.Masker
}

// Kernel holds the method table and the system components behind it.
type Kernel struct {
	Bus     *bus.Bus
	Proc    *proc.Manager
	opts    Config
	started time.Time

	mu      sync.RWMutex
	methods map[string]Method
	skills  func(name string) (path string, ok bool) // SetSkills

	subsMu sync.Mutex
	subs   map[subKey]*bus.Subscription

	attachMu sync.Mutex
	attached map[attachKey]*sessionSink // who else may see and steer a process

	requests atomic.Uint64
	gauges   sync.Map    // name → func() int, e.g. connections from the IPC server
	ready    atomic.Bool // SetReady: what kernel.ping says of the daemon

	approvals *approvals
	// mask masks every secret the kernel has given, in what the bus
	// stores and what the trees that hold them print (secrets.go).
	mask      *secrets.Masker
	dropWatch *bus.Subscription // facts.go; nil without a logger
}

// New returns a kernel over b with the built-in methods registered.
func New(b *bus.Bus, opts Config) *Kernel {
	if opts.Version == "" {
		opts.Version = "dev"
	}
	k := &Kernel{
		Bus: b, Proc: proc.NewManager(b, proc.Config{Launcher: opts.Launcher, Logger: opts.Logger, Host: opts.Host}),
		opts: opts, started: time.Now(), methods: map[string]Method{},
		subs: map[subKey]*bus.Subscription{}, attached: map[attachKey]*sessionSink{},
		mask: opts.Masker,
	}
	if k.mask == nil {
		k.mask = secrets.NewMasker()
	}
	// Whatever anyone publishes, the bus stores with the secrets given so
	// far masked.
	b.SetMask(k.Mask)
	k.registerSystem()
	k.registerEvents()
	k.registerProcess()
	k.registerDevices()
	k.registerApprovals()
	k.watchDropped()
	return k
}

// SetReady says whether the daemon around the kernel is up, which
// kernel.ping answers ([abi.PingResult.Ready]) so that clients can wait for
// it: host.Daemon sets it once it started everything and clears it when it
// begins to stop. A new kernel is not ready.
func (k *Kernel) SetReady(ready bool) { k.ready.Store(ready) }

// Ready is what SetReady last said.
func (k *Kernel) Ready() bool { return k.ready.Load() }

// Close ends every process the kernel runs (the whole trees) and waits for
// their exits to be published. Close the doors first and the bus after.
func (k *Kernel) Close() {
	k.approvals.close() // and saves their checkpoint: the bus is still open
	k.Proc.Close()
	if k.dropWatch != nil {
		k.dropWatch.Close()
	}
}

func (k *Kernel) logger() *slog.Logger {
	if k.opts.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return k.opts.Logger
}

// Register adds m to the table, replacing a method of the same name.
func (k *Kernel) Register(m Method) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.methods[m.Name] = m
}

// Quick reports whether method is registered as Quick.
func (k *Kernel) Quick(method string) bool {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.methods[method].Quick
}

// Methods lists the method names, sorted.
func (k *Kernel) Methods() []string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	names := make([]string, 0, len(k.methods))
	for n := range k.methods {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// SetGauge publishes a named figure in system.get_metrics (for components
// the kernel does not own, such as the IPC server's connection count).
func (k *Kernel) SetGauge(name string, f func() int) { k.gauges.Store(name, f) }

// Invoke runs method for call and returns its MsgPack-encoded result, or an
// error that names what went wrong. A handler that panics is reported as an
// internal error; it never takes the kernel down.
func (k *Kernel) Invoke(ctx context.Context, method string, call *Call) (result msgpack.RawMessage, aerr *abi.Error) {
	k.requests.Add(1)
	k.mu.RLock()
	m, ok := k.methods[method]
	k.mu.RUnlock()
	if !ok {
		return nil, abi.Errorf(abi.CodeUnknownMethod, "unknown method %q; kernel.introspect lists the methods", method)
	}
	if aerr := checkGrants(method, call); aerr != nil {
		return nil, aerr
	}
	defer func() {
		if r := recover(); r != nil {
			buf := make([]byte, 4096)
			buf = buf[:runtime.Stack(buf, false)]
			aerr = abi.Errorf(abi.CodeInternal, "method %s panicked: %v\n%s", method, r, buf)
		}
	}()
	v, err := m.Handler(ctx, call)
	if err != nil {
		return nil, toABIError(method, err)
	}
	raw, err := msgpack.Marshal(v)
	if err != nil {
		return nil, abi.Errorf(abi.CodeInternal, "method %s: encode result: %v", method, err)
	}
	return raw, nil
}

func toABIError(method string, err error) *abi.Error {
	var ae *abi.Error
	if errors.As(err, &ae) {
		return ae
	}
	var se *abi.SubjectError
	if errors.As(err, &se) {
		return abi.Errorf(abi.CodeInvalidParams, "%v", err)
	}
	switch {
	case errors.Is(err, bus.ErrClosed):
		return abi.Errorf(abi.CodeUnavailable, "%s: the kernel is shutting down", method)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return abi.Errorf(abi.CodeUnavailable, "%s: %v", method, err)
	}
	return abi.Errorf(abi.CodeInternal, "%s: %v", method, err)
}
