package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/manifests"
)

// ToolCall is one tool_call action of the agent, as the runtime hands it to
// its Tools.
type ToolCall struct {
	ActionID      string // the idempotency key of the call
	CorrelationID string // the run loop
	Tool          string
	Args          string // JSON, as in OpenAI's format
	// Session is the agent's kernel session. A tool that starts a process
	// starts it in this session, with the run loop as its correlation, so
	// the runtime sees its output and ends it on cancel.
	Session kernel.Session
}

// Tools carries out the agent's tool calls. The runtime publishes
// kairo.tool.invoke before each call and kairo.tool.result, with what Call
// returned, after it. Call returns when ctx ends at the latest; a failed
// call is a result with Status failed and Error saying why, never a panic
// or a hang. An empty Status is done, or failed when Error is set.
type Tools interface {
	Call(ctx context.Context, c ToolCall) abi.ToolResultEvent
}

// KernelTools are the agent's tools when its Config gives none: the
// kernel's process.spawn, for a command line, an argv or a binary skill by
// name.
type KernelTools struct {
	Kernel *kernel.Kernel
	// Skills are the binary skills by name: name → the absolute path of
	// its skill.toml.
	Skills map[string]string
}

// spawnArgs are the arguments of the process.spawn tool.
type spawnArgs struct {
	Argv    []string `json:"argv"`
	Command string   `json:"command"` // run by /bin/sh -c
	Cwd     string   `json:"cwd"`
	// Skill runs a binary skill by name instead: Args are its ARGS as
	// `kairo run` takes them (NAME=VALUE for a param, the rest appended).
	Skill string   `json:"skill"`
	Args  []string `json:"args"`
}

// Call runs c.
func (t KernelTools) Call(ctx context.Context, c ToolCall) abi.ToolResultEvent {
	var res abi.ToolResultEvent
	if c.Tool != "process.spawn" {
		res.Error = fmt.Sprintf("unknown tool %q; the agent's tools are: process.spawn", c.Tool)
		return res
	}
	var args spawnArgs
	if c.Args != "" {
		if err := json.Unmarshal([]byte(c.Args), &args); err != nil {
			res.Error = fmt.Sprintf("process.spawn: arguments are not a JSON object {argv|command, cwd}: %v", err)
			return res
		}
	}
	if args.Command != "" {
		args.Argv = []string{"/bin/sh", "-c", args.Command}
	}
	if len(args.Argv) == 0 && args.Skill == "" {
		res.Error = "process.spawn: give argv (a list), command (a shell line) or skill (a name)"
		return res
	}
	p := abi.SpawnParams{Argv: args.Argv, Cwd: args.Cwd, Mode: "line", CorrelationID: c.CorrelationID, CausationID: c.ActionID}
	if args.Skill != "" {
		if err := t.skillParams(&p, args.Skill, args.Args); err != nil {
			res.Error = err.Error()
			return res
		}
	}
	raw, err := msgpack.Marshal(p)
	if err != nil {
		res.Error = fmt.Sprintf("process.spawn: encode the params: %v", err)
		return res
	}
	out, aerr := t.Kernel.Invoke(ctx, "process.spawn", &kernel.Call{Session: c.Session, Params: raw})
	if aerr != nil {
		res.Error = aerr.Message
		return res
	}
	var info abi.ProcessInfo
	if err := msgpack.Unmarshal(out, &info); err != nil {
		res.Error = err.Error()
		return res
	}
	res.Status, res.ProcessID, res.Result = abi.StatusDone, info.ID, out
	return res
}

func (t KernelTools) skillParams(p *abi.SpawnParams, name string, args []string) error {
	path, ok := t.Skills[name]
	if !ok {
		return fmt.Errorf("process.spawn: no skill %q; the skills are %s", name, strings.Join(slices.Sorted(maps.Keys(t.Skills)), ", "))
	}
	sk, err := manifests.LoadSkill(path)
	if err != nil {
		return fmt.Errorf("process.spawn: skill %s: %v", name, err)
	}
	params, extra := sk.ParamsFromArgs(args)
	if _, err := sk.Argv(params, extra); err != nil {
		return fmt.Errorf("process.spawn: skill %s: %v", name, err)
	}
	p.Manifest, p.Params, p.Argv = path, params, extra
	return nil
}
