// Package tools is the agent's tool registry: one table of OpenAI-format
// tool definitions from every source, and the dispatch of the agent's
// tool calls to them.
//
// The sources, and the names their tools take:
//
//   - the kernel: process.spawn, process.stdin.write, process.wait,
//     process.status, process.signal, process.kill — the agent's way to run
//     things, in its own kernel session, spawned through the sandbox — and
//     result.read, which pages through a stored result;
//   - binary skills: skill.NAME for each skill manifest, its parameters the
//     manifest's params, run under the manifest's sandbox;
//   - wasm plugins of kind tool: PLUGIN.TOOL for each tool a running plugin
//     declares, called through the plugin engine ([ToolPlugins]);
//   - outside sources such as MCP servers: mcp.SERVER.TOOL (AddSource);
//   - tools written in Go by other components (Add).
//
// Names are dotted, as the kernel's methods are; a policy that offers the
// tools to an OpenAI-compatible model, whose tool names are
// [a-zA-Z0-9_-]{1,64}, maps them with modelname.Assign, which tells apart
// names that come out the same (or are cut at 64 characters) by a hash of
// the whole name, the same way every time; `kairo tools` shows the names
// that differ from their plain rewrite.
//
// A name is one tool's: registering a second tool of a name already taken
// is an error. A plugin, which may be loaded at any time, cannot be
// refused that way: its tool whose name is taken is listed with the
// collision as its Error and is not called.
//
// Every call runs under a timeout, on the caller's goroutine, without a
// lock held, so the calls of one decision run side by side. A tool that
// fails, panics or times out yields a failed result; a plugin or an MCP
// server that never answers holds its caller no longer than the timeout.
//
// A result larger than Config.MaxResult is stored once, in
// Config.ResultDir under the SHA-256 of its bytes, and the result carries
// an abi.ToolResultRef {ref, size, preview} instead: the event log and
// the agent's memory hold the reference, not the bulk. The kernel method
// tools.result, and the agent's tool result.read, read it back a window at
// a time.
package tools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
)

// Invocation is one tool call of the agent. tools.Invocation has the same fields,
// so either converts to the other.
type Invocation struct {
	ActionID      string // the idempotency key of the call
	CorrelationID string // the run loop
	Tool          string
	Args          string // JSON, as in OpenAI's format
	// Session is the agent's kernel session. A tool that starts a process
	// starts it in this session, with the run loop as its correlation.
	Session kernel.Session
	// Approval names an approved on-deny approval: a skill's run holds its
	// grants besides the manifest's (abi.SpawnParams.Approval).
	Approval string
}

// Func runs a call of a tool written in Go. It returns when ctx ends at
// the latest. An empty Status is done, or failed when Error is set.
type Func func(ctx context.Context, c *Invocation) abi.ToolResultEvent

// ToolPlugins is what the registry needs of the plugin engine
// (host/wasm's Manager implements it): the tools of the running tool
// plugins, and a call to one. The registry declares it so that it need not
// import the runtime, a floor above it.
type ToolPlugins interface {
	// Tools lists the running tool plugins' tools.
	Tools() []abi.PluginTool
	// List is every plugin and its state, for the grants a tool shows and
	// to tell a stopped plugin's tool from an unknown one.
	List() []abi.PluginStatus
	// CallTool runs call on plugin's tool and returns its result.
	CallTool(ctx context.Context, plugin string, call abi.ToolCall) (abi.ToolResult, error)
}

// Config configures a Registry. Kernel is required.
type Config struct {
	Kernel *kernel.Kernel
	// Plugins are the wasm plugins; their tool plugins' tools are
	// registered while they run. Nil: none.
	Plugins ToolPlugins
	// Skills are the binary skills: name → the absolute path of its
	// skill.toml. Each becomes the tool skill.NAME; process.spawn runs them
	// by name too.
	Skills map[string]string
	// Timeout bounds each call; default 2 minutes.
	Timeout time.Duration
	// MaxResult is the largest result carried in its event, in bytes;
	// larger ones are stored in ResultDir. Default 64 KiB.
	MaxResult int
	// ResultDir keeps the results larger than MaxResult, one file each
	// (the daemon gives its data folder's "results"). Empty: a temporary
	// folder, removed by Close.
	ResultDir string
	Logger    *slog.Logger
}

// Registry is the agent's tools. Its methods may be called from several
// goroutines.
type Registry struct {
	cfg      Config
	log      *slog.Logger
	results  *resultStore
	timedOut error          // the cause of a call's end at the timeout
	wg       sync.WaitGroup // the calls of sources, each on a goroutine

	mu      sync.RWMutex
	tools   map[string]*entry  // the kernel's, the skills', Go tools
	sources map[string]*source // by server name
	skills  map[string]string  // name → the manifest the kernel runs (skills.go)

	watch *skillWatch // the skills folder followed, if any; Close stops it
}

// entry is one registered tool.
type entry struct {
	info abi.ToolInfo
	run  Func
}

// The names of the skills' and the MCP servers' tools start with these.
const (
	skillPrefix = "skill."
	mcpPrefix   = "mcp."
)

// sourceNameRE is what an MCP server's name may be: it is one token of
// its tools' names.
var sourceNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// New returns the registry of cfg.Kernel's tools, cfg.Skills and the tool
// plugins of cfg.Plugins. Register registers its kernel methods; Close
// releases it.
func New(cfg Config) (*Registry, error) {
	if cfg.Kernel == nil {
		return nil, errors.New("tools: Config.Kernel is required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.MaxResult <= 0 {
		cfg.MaxResult = 64 << 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	results, err := openResults(cfg.ResultDir)
	if err != nil {
		return nil, err
	}
	r := &Registry{cfg: cfg, log: cfg.Logger, results: results, tools: map[string]*entry{}, sources: map[string]*source{},
		skills: maps.Clone(cfg.Skills), timedOut: fmt.Errorf("no result within %v, the timeout of a tool call", cfg.Timeout)}
	var errs []error
	for _, t := range r.kernelTools() {
		errs = append(errs, r.Add(t.info, t.run))
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Skills)) {
		errs = append(errs, r.addSkill(name, cfg.Skills[name]))
	}
	if err := errors.Join(errs...); err != nil {
		results.close()
		return nil, err
	}
	// The kernel runs skills for principals other than the operator only
	// by name: these are the installed ones — cfg.Skills, or as
	// WatchSkills keeps them, from its first scan on (until then the
	// kernel keeps the lookup it had, so a spawn by name just after the
	// daemon opened its socket finds the skill).
	if cfg.Skills != nil {
		cfg.Kernel.SetSkills(r.SkillPath)
	}
	return r, nil
}

// Close waits for the calls of sources still running, then removes the
// results folder if New made a temporary one.
func (r *Registry) Close() error {
	r.stopWatch()
	r.wg.Wait()
	return r.results.close()
}

// Add registers a tool written in Go. Its Name must be free; Source says
// where it comes from (an abi.ToolSource* value, or the component's name).
func (r *Registry) Add(info abi.ToolInfo, run Func) error {
	if info.Name == "" {
		return errors.New("tools: a tool needs a name")
	}
	if run == nil {
		return fmt.Errorf("tools: tool %s has no function to run", info.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.freeLocked(info.Name); err != nil {
		return err
	}
	r.tools[info.Name] = &entry{info: info, run: run}
	return nil
}

// freeLocked says why name cannot be registered, or nil.
func (r *Registry) freeLocked(name string) error {
	if e, ok := r.tools[name]; ok {
		return fmt.Errorf("tools: %s is already a tool (%s); give the new one another name", name, describeOrigin(e.info))
	}
	if rest, ok := strings.CutPrefix(name, mcpPrefix); ok {
		server, _, _ := strings.Cut(rest, ".")
		if _, ok := r.sources[server]; ok {
			return fmt.Errorf("tools: %s is in the names of MCP server %s; give the new tool another name", name, server)
		}
	}
	return nil
}

func describeOrigin(t abi.ToolInfo) string {
	if t.Origin == "" {
		return "from the " + t.Source
	}
	return fmt.Sprintf("from %s %s", t.Source, t.Origin)
}

// Call runs c and returns its result for kairo.tool.result. It never
// panics and returns within the timeout.
func (r *Registry) Call(ctx context.Context, c Invocation) (res abi.ToolResultEvent) {
	ctx, cancel := context.WithTimeoutCause(ctx, r.cfg.Timeout, r.timedOut)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("a tool panicked", "tool", c.Tool, "actionId", c.ActionID, "panic", p, "stack", string(debug.Stack()))
			res = abi.ToolResultEvent{Status: abi.StatusFailed, Error: fmt.Sprintf("tool %s failed: it panicked: %v", c.Tool, p)}
		}
		if res.Status == "" {
			res.Status = abi.StatusDone
			if res.Error != "" {
				res.Status = abi.StatusFailed
			}
		}
	}()
	r.mu.RLock()
	e := r.tools[c.Tool]
	r.mu.RUnlock()
	switch {
	case e != nil:
		return e.run(ctx, &c)
	case strings.HasPrefix(c.Tool, mcpPrefix):
		return r.callSource(ctx, &c)
	case strings.Contains(c.Tool, ".") && r.cfg.Plugins != nil:
		return r.callPlugin(ctx, &c)
	}
	return abi.ToolResultEvent{Error: r.unknown(c.Tool)}
}

// unknown is the error of a call of a tool that does not exist.
func (r *Registry) unknown(name string) string {
	var names []string
	for _, t := range r.List() {
		if t.Error == "" {
			names = append(names, t.Name)
		}
	}
	return fmt.Sprintf("unknown tool %q; the tools are: %s", name, strings.Join(names, ", "))
}

// List reports every tool, sorted by name: the registered ones, the
// sources' and the running tool plugins'.
func (r *Registry) List() []abi.ToolInfo {
	r.mu.RLock()
	out := make([]abi.ToolInfo, 0, len(r.tools))
	for _, e := range r.tools {
		out = append(out, e.info)
	}
	sources := slices.Collect(maps.Values(r.sources))
	r.mu.RUnlock()
	for _, s := range sources {
		out = append(out, s.list()...)
	}
	out = append(out, r.pluginTools(out)...)
	slices.SortFunc(out, func(a, b abi.ToolInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Definitions are the definitions of the tools that can be called, in the
// OpenAI function format, sorted by name: what a policy offers a model.
func (r *Registry) Definitions() []abi.Tool {
	var out []abi.Tool
	for _, t := range r.List() {
		if t.Error == "" {
			out = append(out, t.Tool)
		}
	}
	return out
}

// Register adds the registry's methods to the kernel's table: tools.list,
// which `kairo tools` calls, and tools.result, which reads a stored
// result.
func (r *Registry) Register() {
	r.cfg.Kernel.Register(kernel.Method{Name: abi.MethodToolsList, Summary: "the agent's tools: definitions, sources, grants", Handler: r.listMethod})
	r.cfg.Kernel.Register(kernel.Method{Name: abi.MethodToolsResult, Summary: "read a tool result stored by reference", Handler: r.resultMethod})
}

func (r *Registry) listMethod(ctx context.Context, c *kernel.Call) (any, error) {
	return abi.ToolsListResult{Tools: r.List()}, nil
}

func (r *Registry) resultMethod(ctx context.Context, c *kernel.Call) (any, error) {
	var p abi.ToolResultParams
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	return r.results.read(p)
}

// content is the result of a tool that answers with text: the text, or
// its reference once it is larger than MaxResult; an error result's text
// is its Error.
func (r *Registry) content(text string, isError bool) abi.ToolResultEvent {
	var res abi.ToolResultEvent
	if len(text) > r.cfg.MaxResult {
		ref, err := r.results.put(text)
		if err != nil {
			r.log.Error("store a large tool result", "bytes", len(text), "err", err)
			res.Error = fmt.Sprintf("the tool answered %d bytes, more than the %d a result carries, and storing them failed: %v", len(text), r.cfg.MaxResult, err)
			return res
		}
		res.Result = encode(ref)
		if isError {
			res.Error = fmt.Sprintf("%s… (the whole error, %d bytes, is stored as %s)", ref.Preview, ref.Size, ref.Ref)
		}
		return res
	}
	if isError {
		res.Error = text
		if text == "" {
			res.Error = "the tool failed and said nothing more"
		}
		return res
	}
	res.Result = encode(text)
	return res
}

// encode is v as MsgPack, for a result. v is a value of this package's
// own, which always encodes.
func encode(v any) msgpack.RawMessage {
	raw, err := msgpack.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("tools: encode %T: %v", v, err))
	}
	return raw
}

// errorResult is a failed result saying err.
func errorResult(format string, args ...any) abi.ToolResultEvent {
	return abi.ToolResultEvent{Error: fmt.Sprintf(format, args...)}
}
