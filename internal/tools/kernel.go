package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/manifests"
)

// The kernel's tools: the process methods, called in the agent's kernel
// session, so the agent steers only the processes it spawned, and a
// spawn goes through the kernel's launcher, the sandbox.

// What the kernel tools may reach, for tools.list.
var (
	spawnGrants   = []string{"spawns in the kernel's sandbox (a skill within its manifest's grants), as the agent"}
	processGrants = []string{"only the processes the agent spawned"}
	resultGrants  = []string{"the stored tool results"}
)

// defaultWait is how long process.wait waits when the call says not.
const defaultWait = 30 * time.Second

func (r *Registry) kernelTools() []entry {
	def := func(name, desc string, params map[string]any, run Func) entry {
		grants := processGrants
		switch name {
		case abi.MethodProcessSpawn:
			grants = spawnGrants
		case "result.read":
			grants = resultGrants
		}
		return entry{abi.ToolInfo{Tool: abi.Tool{Name: name, Description: desc, Parameters: params}, Source: abi.ToolSourceKernel, Grants: grants}, run}
	}
	processID := prop("string", "the process, as process.spawn returned it")
	return []entry{
		def(abi.MethodProcessSpawn, "Start a process in the sandbox: a shell command line, an argv, or a binary skill by name. Returns its processId at once; its exit and last output lines arrive later as events of the run loop.",
			object(nil, map[string]any{
				"command": prop("string", "a shell command line, run by /bin/sh -c"),
				"argv":    array("the program and its arguments, instead of command"),
				"cwd":     prop("string", "the working folder"),
				"skill":   prop("string", "the name of a binary skill to run instead"),
				"args":    array("with skill: its arguments as `kairo run` takes them, NAME=VALUE for a param, the rest appended"),
			}), r.spawnTool),
		def(abi.MethodProcessStdinWrite, "Write text to a process's standard input, and close it with close.",
			object([]string{"processId"}, map[string]any{
				"processId": processID,
				"data":      prop("string", "the text to write"),
				"close":     prop("boolean", "close the input after the text (end of file)"),
			}), r.processTool(abi.MethodProcessStdinWrite, stdinParams)),
		def(abi.MethodProcessWait, "Wait for a process to exit, at most timeout seconds (default 30). Returns the process; timedOut when it still runs.",
			object([]string{"processId"}, map[string]any{
				"processId": processID,
				"timeout":   prop("number", "seconds to wait at most"),
			}), r.processTool(abi.MethodProcessWait, waitParams)),
		def(abi.MethodProcessStatus, "A process's state: running, exited with its code, or killed; without processId, every process of the agent.",
			object(nil, map[string]any{"processId": processID}), r.processTool(abi.MethodProcessStatus, processRef)),
		def(abi.MethodProcessSignal, "Send a signal to a process and its children: TERM (the default) asks it to stop, INT interrupts, STOP and CONT pause and resume.",
			object([]string{"processId"}, map[string]any{
				"processId": processID,
				"signal":    prop("string", "a signal name such as TERM or INT"),
			}), r.processTool(abi.MethodProcessSignal, signalParams)),
		def(abi.MethodProcessKill, "Kill a process and its children at once (SIGKILL).",
			object([]string{"processId"}, map[string]any{"processId": processID}), r.processTool(abi.MethodProcessKill, processRef)),
		def("result.read", "Read part of a tool result too large to carry, stored by reference: the text from offset, at most limit bytes.",
			object([]string{"ref"}, map[string]any{
				"ref":    prop("string", "the result's ref, such as sha256:…"),
				"offset": prop("integer", "the byte to start at; default 0"),
				"limit":  prop("integer", fmt.Sprintf("the bytes to read at most; default and at most %d", r.cfg.MaxResult)),
			}), r.readTool),
	}
}

// object is the JSON schema of an object with the properties props.
func object(required []string, props map[string]any) map[string]any {
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func prop(typ, desc string) map[string]any { return map[string]any{"type": typ, "description": desc} }

func array(desc string) map[string]any {
	return map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": desc}
}

// args decodes the JSON arguments of c into v; none is {}.
func args(c *Invocation, v any, shape string) error {
	if c.Args == "" {
		return nil
	}
	if err := json.Unmarshal([]byte(c.Args), v); err != nil {
		return fmt.Errorf("%s: arguments are not a JSON object %s: %v", c.Tool, shape, err)
	}
	return nil
}

// invoke calls a kernel method in the caller's session.
func (r *Registry) invoke(ctx context.Context, c *Invocation, method string, params any) (msgpack.RawMessage, error) {
	if c.Session == nil {
		return nil, fmt.Errorf("%s: the call has no kernel session to run in; give Call.Session", c.Tool)
	}
	raw, err := msgpack.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("%s: encode the params: %v", c.Tool, err)
	}
	out, aerr := r.cfg.Kernel.Invoke(ctx, method, &kernel.Call{Session: c.Session, Params: raw})
	if aerr != nil {
		return nil, fmt.Errorf("%s", aerr.Message)
	}
	return out, nil
}

// kernelResult is the result of a kernel method: what it returned, or its
// error.
func (r *Registry) kernelResult(ctx context.Context, c *Invocation, method string, params any) abi.ToolResultEvent {
	out, err := r.invoke(ctx, c, method, params)
	if err != nil {
		return abi.ToolResultEvent{Error: err.Error()}
	}
	return abi.ToolResultEvent{Result: out}
}

// SpawnArgs are the arguments of process.spawn, as a tool call gives them
// in JSON.
type SpawnArgs struct {
	Argv    []string `json:"argv"`
	Command string   `json:"command"` // run by /bin/sh -c
	Cwd     string   `json:"cwd"`
	// Skill runs a binary skill by name instead: Args are its ARGS as
	// `kairo run` takes them (NAME=VALUE for a param, the rest appended).
	Skill string   `json:"skill"`
	Args  []string `json:"args"`
}

func (r *Registry) spawnTool(ctx context.Context, c *Invocation) abi.ToolResultEvent {
	var a SpawnArgs
	if err := args(c, &a, "{argv|command, cwd}"); err != nil {
		return abi.ToolResultEvent{Error: err.Error()}
	}
	if a.Command != "" {
		a.Argv = []string{"/bin/sh", "-c", a.Command}
	}
	if len(a.Argv) == 0 && a.Skill == "" {
		return errorResult("process.spawn: give argv (a list), command (a shell line) or skill (a name)")
	}
	p := abi.SpawnParams{Argv: a.Argv, Cwd: a.Cwd}
	if a.Skill != "" {
		path, ok := r.SkillPath(a.Skill)
		if !ok {
			return errorResult("process.spawn: %s", NoSkill(a.Skill))
		}
		sk, err := manifests.LoadSkill(path)
		if err != nil {
			return errorResult("process.spawn: skill %s: %v", a.Skill, err)
		}
		params, extra := sk.ParamsFromArgs(a.Args)
		if _, err := sk.Argv(params, extra); err != nil {
			return errorResult("process.spawn: skill %s: %v", a.Skill, err)
		}
		p.Skill, p.Params, p.Argv, p.Approval = a.Skill, params, extra, c.Approval
	}
	return r.spawn(ctx, c, p)
}

// spawn starts p in the caller's session, as a step of its run loop: the
// result carries the process, and the action runs until the process ends.
func (r *Registry) spawn(ctx context.Context, c *Invocation, p abi.SpawnParams) abi.ToolResultEvent {
	p.Mode, p.CorrelationID, p.CausationID = "line", c.CorrelationID, c.ActionID
	out, err := r.invoke(ctx, c, abi.MethodProcessSpawn, p)
	if err != nil {
		return abi.ToolResultEvent{Error: err.Error()}
	}
	var info abi.ProcessInfo
	if err := msgpack.Unmarshal(out, &info); err != nil {
		return abi.ToolResultEvent{Error: err.Error()}
	}
	return abi.ToolResultEvent{Status: abi.StatusDone, ProcessID: info.ID, Result: out}
}

// processArgs are the arguments of the process tools but spawn: each
// takes those its schema lists.
type processArgs struct {
	ProcessID string  `json:"processId"`
	Data      string  `json:"data"`
	Close     bool    `json:"close"`
	Timeout   float64 `json:"timeout"` // seconds
	Signal    string  `json:"signal"`
}

// processTool is the tool that calls method with the params made of its
// arguments.
func (r *Registry) processTool(method string, params func(a *processArgs) any) Func {
	return func(ctx context.Context, c *Invocation) abi.ToolResultEvent {
		var a processArgs
		if err := args(c, &a, "{processId, ...}"); err != nil {
			return abi.ToolResultEvent{Error: err.Error()}
		}
		return r.kernelResult(ctx, c, method, params(&a))
	}
}

func stdinParams(a *processArgs) any {
	return abi.StdinParams{ProcessID: a.ProcessID, Data: []byte(a.Data), Close: a.Close}
}

// waitParams waits defaultWait unless the call says; the call's own
// timeout ends the wait too, as timedOut.
func waitParams(a *processArgs) any {
	wait := defaultWait
	if a.Timeout > 0 {
		wait = time.Duration(a.Timeout * float64(time.Second))
	}
	return abi.WaitParams{ProcessID: a.ProcessID, Timeout: wait}
}

func signalParams(a *processArgs) any {
	if a.Signal == "" {
		a.Signal = "TERM"
	}
	return abi.SignalParams{ProcessID: a.ProcessID, Signal: a.Signal}
}

func processRef(a *processArgs) any { return abi.ProcessRef{ProcessID: a.ProcessID} }

func (r *Registry) readTool(ctx context.Context, c *Invocation) abi.ToolResultEvent {
	var a struct {
		Ref    string `json:"ref"`
		Offset int64  `json:"offset"`
		Limit  int    `json:"limit"`
	}
	if err := args(c, &a, "{ref, offset, limit}"); err != nil {
		return abi.ToolResultEvent{Error: err.Error()}
	}
	if a.Limit <= 0 || a.Limit > r.cfg.MaxResult {
		a.Limit = r.cfg.MaxResult
	}
	d, err := r.results.read(abi.ToolResultParams{Ref: a.Ref, Offset: a.Offset, Limit: a.Limit})
	var ae *abi.Error
	if errors.As(err, &ae) {
		return errorResult("result.read: %s", ae.Message)
	} else if err != nil {
		return errorResult("result.read: %v", err)
	}
	return abi.ToolResultEvent{Result: encode(string(d.Data))}
}
