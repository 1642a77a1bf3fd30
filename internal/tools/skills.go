package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/manifests"
)

// Binary skills as tools: skill.NAME takes the manifest's params as a JSON
// object and spawns the skill under its manifest's sandbox, in the
// caller's session, like process.spawn with skill.

// addSkill registers the skill name, whose manifest is at path.
func (r *Registry) addSkill(name, path string) error {
	return r.addSkillFrom(name, path, path, false)
}

// addSkillFrom registers the skill name installed at origin, whose
// manifest the kernel runs is run (a copy of origin's folder the
// sandboxes' uids may reach, or origin itself). With replace, it takes
// the place of the skill of that name in one step: a call or a spawn by
// name never finds neither.
func (r *Registry) addSkillFrom(name, origin, run string, replace bool) error {
	sk, err := manifests.LoadSkill(run)
	if err != nil {
		return fmt.Errorf("tools: skill %s: %w", name, err)
	}
	desc := sk.Skill.Description
	if desc == "" {
		desc = "The binary skill " + name + "."
	}
	desc += " Starts it in its sandbox and returns its processId at once; its exit and last output lines arrive later as events of the run loop."
	info := abi.ToolInfo{
		Tool:   abi.Tool{Name: skillPrefix + name, Description: desc, Parameters: sk.JSONSchema()},
		Source: abi.ToolSourceSkill, Origin: origin, Grants: SkillGrants(sk),
	}
	e := &entry{info: info, run: func(ctx context.Context, c *Invocation) abi.ToolResultEvent { return r.runSkill(ctx, c, name, run) }}
	r.mu.Lock()
	defer r.mu.Unlock()
	if replace {
		delete(r.tools, info.Name)
	}
	if err := r.freeLocked(info.Name); err != nil {
		return err
	}
	r.tools[info.Name] = e
	if r.skills == nil {
		r.skills = map[string]string{}
	}
	r.skills[name] = run
	return nil
}

// removeSkill unregisters the skill name and its tool.
func (r *Registry) removeSkill(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.skills, name)
	delete(r.tools, skillPrefix+name)
}

// SkillPath is the skill.toml the kernel runs for the installed skill name:
// a copy of its folder when the skills folder is staged (SkillsFolder).
func (r *Registry) SkillPath(name string) (string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	path, ok := r.skills[name]
	return path, ok
}

// SkillNames are the names of the installed skills, sorted: what a policy
// may run by name. They change as the skills folder does (WatchSkills).
func (r *Registry) SkillNames() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.skills))
}

// NoSkill is the error of a skill asked for by a name none has.
func NoSkill(name string) string {
	return fmt.Sprintf("no skill named %q; `kairo tools` lists the skills", name)
}

func (r *Registry) runSkill(ctx context.Context, c *Invocation, name, path string) abi.ToolResultEvent {
	var a map[string]any
	if c.Args != "" {
		dec := json.NewDecoder(strings.NewReader(c.Args))
		dec.UseNumber()
		if err := dec.Decode(&a); err != nil {
			return errorResult("%s: arguments are not a JSON object of the skill's params: %v", c.Tool, err)
		}
	}
	params := make(map[string]string, len(a))
	for k, v := range a {
		switch v := v.(type) {
		case string:
			params[k] = v
		case json.Number:
			params[k] = v.String()
		case bool:
			params[k] = strconv.FormatBool(v)
		case nil:
			// null: as if not given
		default:
			return errorResult("%s: param %q is %s; give a string, a number or true/false", c.Tool, k, jsonKind(v))
		}
	}
	// Read again: the manifest may have changed since it was registered.
	sk, err := manifests.LoadSkill(path)
	if err != nil {
		return errorResult("%s: %v", c.Tool, err)
	}
	if _, err := sk.Argv(params, nil); err != nil {
		return errorResult("%s: %v", c.Tool, err)
	}
	return r.spawn(ctx, c, abi.SpawnParams{Skill: name, Params: params, Approval: c.Approval})
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}

// SkillGrants says what a skill manifest grants, an item a key, as
// tools.list shows it: for a skill's tool, or for an MCP server whose
// sandbox is written in a skill manifest's words.
func SkillGrants(sk *manifests.Skill) []string {
	var out []string
	list := func(key string, v []string) {
		if len(v) > 0 {
			out = append(out, key+" "+strings.Join(v, ", "))
		}
	}
	ports := func(key string, v []uint16) {
		s := make([]string, len(v))
		for i, p := range v {
			s[i] = strconv.Itoa(int(p))
		}
		list(key, s)
	}
	list("fs.read", sk.FS.Read)
	list("fs.write", sk.FS.Write)
	list("fs.exec", sk.FS.Exec)
	ports("net.connect_tcp", sk.Net.ConnectTCP)
	ports("net.bind_tcp", sk.Net.BindTCP)
	if sk.Net.UDP {
		out = append(out, "net.udp")
	}
	list("net.unix", sk.Net.Unix)
	list("net.hosts", sk.Net.Hosts)
	list("ipc.call", sk.IPC.Call)
	list("ipc.publish", sk.IPC.Publish)
	list("ipc.subscribe", sk.IPC.Subscribe)
	list("env.pass", sk.Env.Pass)
	var limits []string
	l := sk.Limits
	for _, n := range []struct {
		key string
		v   int
	}{{"cpu_seconds", l.CPUSeconds}, {"wall_seconds", l.WallSeconds}, {"processes", l.Processes}, {"open_files", l.OpenFiles}} {
		if n.v > 0 {
			limits = append(limits, fmt.Sprintf("%s=%d", n.key, n.v))
		}
	}
	for _, z := range []struct {
		key string
		v   fmt.Stringer
		set bool
	}{{"memory", l.Memory, l.Memory > 0}, {"file_size", l.FileSize, l.FileSize > 0}, {"output_bytes", l.OutputBytes, l.OutputBytes > 0}, {"output_rate", l.OutputRate, l.OutputRate > 0}} {
		if z.set {
			limits = append(limits, z.key+"="+z.v.String())
		}
	}
	list("limits", limits)
	if sk.Sandbox.PTY {
		out = append(out, "pty")
	}
	return out
}

// ApprovalMode is the [approval] mode the manifest of the skill behind
// tool ("skill.NAME") asks for; "never" for another tool, or a skill whose
// manifest says none (or cannot be read: its call fails anyway).
func (r *Registry) ApprovalMode(tool string) string {
	name, ok := strings.CutPrefix(tool, "skill.")
	if !ok {
		return manifests.ApprovalNever
	}
	path, ok := r.SkillPath(name)
	if !ok {
		return manifests.ApprovalNever
	}
	sk, err := manifests.LoadSkill(path)
	if err != nil || sk.Approval.Mode == "" {
		return manifests.ApprovalNever
	}
	return sk.Approval.Mode
}
