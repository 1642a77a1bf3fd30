package mcp

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sandbox"
)

// Defaults of the ServerConfig durations left at zero.
const (
	DefaultConnectTimeout = 30 * time.Second
	DefaultShutdownGrace  = 2 * time.Second
)

// ServerConfig is one MCP server, a [mcp.NAME] table of kairo.toml. Give
// Command for a server that speaks MCP on its stdin and stdout, or URL for
// one that speaks streamable HTTP.
type ServerConfig struct {
	// Name names the server in logs, errors and its process's caller: the
	// NAME of [mcp.NAME].
	Name string `toml:"-"`
	// Command is the program and its arguments, such as ["/usr/bin/node",
	// "/opt/mcp/filesystem/dist/index.js", "/srv/docs"]. With
	// Sandbox.Manifest, the manifest's [skill].command starts the server
	// and Command, if given, is appended to it as arguments.
	Command []string `toml:"command"`
	// URL is a streamable HTTP endpoint, such as "http://127.0.0.1:8931/mcp".
	URL string `toml:"url"`
	// Secrets are the operator's secrets the server is given when it
	// starts ([mcp.NAME.secrets]), as a skill's manifest gives them.
	Secrets manifests.SecretGrants `toml:"-"`
	// Env sets variables for a stdio server. Its environment holds only
	// what is named: the sandbox's minimal one (sandbox.BaseEnv, and HOME
	// and TMPDIR under a sandboxing kernel), the variables of EnvPass and
	// then Env. The kernel's own environment, its LLM API key included,
	// never reaches a server unless passed by name.
	Env map[string]string `toml:"env"`
	// EnvPass names variables copied from the kernel's environment into
	// the server's, such as ["OPENAI_API_KEY"] for a server that calls
	// the model itself; a name the kernel does not have is left out.
	EnvPass []string `toml:"env_pass"`
	// Cwd is a stdio server's working folder: "" is the kernel's own, or
	// the run's workspace under a sandboxing kernel.
	Cwd string `toml:"cwd"`
	// Sandbox confines a stdio server. Nil spawns it as any spawn without a
	// manifest: under `kairo up`, the sandbox's default profile.
	Sandbox *Sandbox `toml:"sandbox"`
	// ConnectTimeout bounds a start: the spawn, the MCP handshake and the
	// first tool list. Zero is DefaultConnectTimeout.
	ConnectTimeout time.Duration `toml:"connect_timeout"`
	// ShutdownGrace is how long a stop waits for the server to exit after
	// its stdin is closed, and again after SIGTERM, before SIGKILL ends
	// its process group. Zero is DefaultShutdownGrace.
	ShutdownGrace time.Duration `toml:"shutdown_grace"`
	// MaxTools caps the tools listed: a list that goes on past it, page
	// after page, fails the start, saying so. Zero is DefaultMaxTools.
	MaxTools int `toml:"max_tools"`
	// MaxResultBytes caps a tool's result, as text; one message from the
	// server may be twice it and 64 KiB more (JSON escapes, the envelope),
	// and is read no further: a longer one fails the call it answers, or
	// the tool list it is a page of. Zero is DefaultMaxResultBytes.
	MaxResultBytes int64 `toml:"max_result_bytes"`
}

// Defaults of the ServerConfig caps left at zero: more tools than a model
// can choose among, and a result far larger than a model can read.
const (
	DefaultMaxTools       = 256
	DefaultMaxResultBytes = 1 << 20
)

// maxMessage is the longest message read from the server.
func (c *ServerConfig) maxMessage() int {
	return int(min(2*c.MaxResultBytes+64<<10, maxLine))
}

// Sandbox is [mcp.NAME.sandbox]: what a stdio server may touch, as a binary
// skill's manifest says it. Either Manifest, the path of a skill.toml, or
// grants written here in the same vocabulary ([fs], [net], [env],
// [limits] of a skill manifest) for Command; not both. The kernel applies
// them only when it runs a sandboxing launcher, as `kairo up` does.
type Sandbox struct {
	Manifest string                `toml:"manifest"`
	FS       manifests.FSGrants    `toml:"fs"`
	Net      manifests.NetGrants   `toml:"net"`
	Env      manifests.EnvGrants   `toml:"env"`
	Limits   manifests.SkillLimits `toml:"limits"`
}

// grants reports whether any grant is written inline.
func (s *Sandbox) grants() bool {
	g := *s
	g.Manifest = ""
	return !reflect.ValueOf(g).IsZero()
}

// check validates c and fills in the defaults. Every problem is reported,
// joined, each naming its key.
func (c *ServerConfig) check() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("mcp server %q: "+format, append([]any{c.Name}, args...)...))
	}
	if c.Name == "" {
		errs = append(errs, errors.New("mcp server: name is empty; name each server, as the NAME of [mcp.NAME]"))
	}
	manifest := c.Sandbox != nil && c.Sandbox.Manifest != ""
	switch {
	case c.URL != "" && (len(c.Command) > 0 || manifest):
		bad("give command (a stdio server) or url (a streamable HTTP server), not both")
	case c.URL != "":
		if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("url %q is not an http or https URL, such as \"http://127.0.0.1:8931/mcp\"", c.URL)
		}
		if c.Sandbox != nil {
			bad("sandbox applies to a stdio server that the kernel starts; a server at a url runs elsewhere: remove [sandbox] or give command")
		}
		if len(c.Env) > 0 || len(c.EnvPass) > 0 || c.Cwd != "" {
			bad("env, env_pass and cwd apply to a stdio server that the kernel starts; remove them for a server at a url")
		}
	case len(c.Command) == 0 && !manifest:
		bad(`command is empty: give the program and its arguments, such as ["/usr/bin/node", "server.js"], or url for a streamable HTTP server`)
	case len(c.Command) > 0 && c.Command[0] == "" && !manifest:
		bad("command[0] is empty: name the program")
	}
	if c.Sandbox != nil {
		if manifest && c.Sandbox.grants() {
			bad("sandbox: give manifest or grants (fs, net, env, limits), not both")
		}
		if manifest && !filepath.IsAbs(c.Sandbox.Manifest) {
			bad("sandbox.manifest %q: give the skill.toml as an absolute path", c.Sandbox.Manifest)
		}
	}
	if c.Cwd != "" && !filepath.IsAbs(c.Cwd) {
		bad("cwd %q: give an absolute path", c.Cwd)
	}
	for name := range c.Env {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			bad("env: %q is not a variable name", name)
		}
	}
	for i, name := range c.EnvPass {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			bad("env_pass[%d]: %q is not a variable name", i, name)
		}
	}
	if c.ConnectTimeout < 0 {
		bad("connect_timeout %s is negative; leave it out for %s", c.ConnectTimeout, DefaultConnectTimeout)
	}
	if c.ShutdownGrace < 0 {
		bad("shutdown_grace %s is negative; leave it out for %s", c.ShutdownGrace, DefaultShutdownGrace)
	}
	if c.MaxTools < 0 {
		bad("max_tools %d is negative; leave it out for %d", c.MaxTools, DefaultMaxTools)
	}
	if c.MaxResultBytes < 0 || c.MaxResultBytes > maxLine/2 {
		bad("max_result_bytes %d is out of range; give up to %d bytes, or leave it out for %d", c.MaxResultBytes, maxLine/2, DefaultMaxResultBytes)
	}
	if c.MaxTools == 0 {
		c.MaxTools = DefaultMaxTools
	}
	if c.MaxResultBytes == 0 {
		c.MaxResultBytes = DefaultMaxResultBytes
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	return errors.Join(errs...)
}

// env is what the config names of the server's environment: the
// variables of pass found in kernelEnv, then Env, sorted by name within
// each.
func (c *ServerConfig) env(pass []string, kernelEnv []string) []string {
	var out []string
	for _, name := range pass {
		for _, kv := range kernelEnv {
			if n, _, _ := strings.Cut(kv, "="); n == name {
				out = sandbox.MergeEnv(out, []string{kv})
			}
		}
	}
	set := make([]string, 0, len(c.Env))
	for k, v := range c.Env {
		set = append(set, k+"="+v)
	}
	slices.Sort(set)
	return sandbox.MergeEnv(out, set)
}

// spec is the kernel spawn of a stdio server: its command as it is, or
// under the grants of its sandbox. Its environment is always given
// (spec.Env nil would be the kernel's whole environment under a launcher
// that does not sandbox): the minimal one and what the config names.
func (c *ServerConfig) spec() (proc.Spec, error) {
	kernelEnv := os.Environ()
	env := c.env(c.EnvPass, kernelEnv)
	if c.Sandbox == nil {
		// The default profile adds HOME and TMPDIR under a sandboxing
		// launcher.
		spec := proc.Spec{Argv: c.Command, Cwd: c.Cwd, Env: sandbox.MergeEnv(sandbox.BaseEnv(), env)}
		return c.stdio(spec), nil
	}
	skill, extra, err := c.skill()
	if err != nil {
		return proc.Spec{}, err
	}
	if skill.Sandbox.PTY {
		return proc.Spec{}, fmt.Errorf("mcp server %q: %s asks for a terminal ([sandbox] pty = true); an MCP server speaks JSON-RPC on plain stdin and stdout: remove it", c.Name, skill.File)
	}
	if skill.Limits.OutputBytes > 0 || skill.Limits.OutputRate > 0 {
		return proc.Spec{}, fmt.Errorf("mcp server %q: %s limits output (output_bytes or output_rate), which would cut the server's JSON-RPC answers: leave them out for an MCP server", c.Name, skill.File)
	}
	spec, err := proc.SkillSpec(skill, nil, extra, c.Cwd, kernelEnv)
	if err != nil {
		return proc.Spec{}, fmt.Errorf("mcp server %q: %w", c.Name, err)
	}
	// Under a launcher that does not sandbox, the grants do not apply but
	// their env.pass still names what the server may have.
	spec.Env = sandbox.MergeEnv(sandbox.BaseEnv(), c.env(slices.Concat(skill.Env.Pass, c.EnvPass), kernelEnv))
	if policy := spec.Policy; len(env) > 0 {
		spec.Policy = func(work, tmp string) (*sandbox.Policy, error) {
			p, err := policy(work, tmp)
			if err == nil {
				p.Env = sandbox.MergeEnv(p.Env, env)
			}
			return p, err
		}
	}
	return c.stdio(spec), nil
}

// stdio sets what an MCP stream needs of a spawn: output as it comes,
// unexamined.
func (c *ServerConfig) stdio(spec proc.Spec) proc.Spec {
	spec.Mode, spec.Encoding = proc.ModeChunk, proc.EncodingBinary
	return spec
}

// skill is the binary skill the server runs as, and the arguments to
// append to its command: the manifest's, or one made of the inline grants.
func (c *ServerConfig) skill() (*manifests.Skill, []string, error) {
	if m := c.Sandbox.Manifest; m != "" {
		s, err := manifests.LoadSkill(m)
		if err != nil {
			return nil, nil, fmt.Errorf("mcp server %q: sandbox.manifest: %w", c.Name, err)
		}
		return s, c.Command, nil
	}
	prog := c.Command[0]
	if !strings.Contains(prog, "/") {
		p, err := exec.LookPath(prog)
		if err != nil {
			return nil, nil, fmt.Errorf("mcp server %q: command[0] %q: %w; give the program's absolute path", c.Name, prog, err)
		}
		prog = p
	}
	if abs, err := filepath.Abs(prog); err == nil {
		prog = abs
	}
	// The grants are checked as a skill.toml is: the same vocabulary, the
	// same errors. The arguments go after the command as they are, so that
	// a {word} in them is not taken for a param.
	doc := fields(reflect.ValueOf(*c.Sandbox))
	delete(doc, "manifest")
	doc["skill"] = map[string]any{"name": "mcp-server", "command": []string{prog}}
	text, err := toml.Marshal(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("mcp server %q: sandbox: %w", c.Name, err)
	}
	if strings.Contains(string(text), "$"+manifests.VarSkillDir) {
		return nil, nil, fmt.Errorf("[mcp.%s] sandbox: $%s means the folder of a skill.toml, and grants written in kairo.toml have none: give absolute paths, or put the grants in a manifest", c.Name, manifests.VarSkillDir)
	}
	s, err := manifests.ParseSkill("sandbox.toml", text)
	if err != nil {
		return nil, nil, c.grantErrors(err)
	}
	return s, c.Command[1:], nil
}

// grantErrors restates the errors of the made-up manifest in the terms of
// [mcp.NAME]: its keys, without the lines of a file nobody wrote.
func (c *ServerConfig) grantErrors(err error) error {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	out := make([]error, 0, len(errs))
	for _, e := range errs {
		var me *manifests.Error
		if !errors.As(e, &me) {
			out = append(out, e)
			continue
		}
		key := "sandbox." + me.Key
		if strings.HasPrefix(me.Key, "skill.command") {
			key = strings.TrimPrefix(me.Key, "skill.")
		}
		out = append(out, fmt.Errorf("[mcp.%s] %s: %s", c.Name, key, me.Msg))
	}
	return errors.Join(out...)
}

// fields is the TOML document of a struct: its fields that are set, by
// their toml keys, tables as nested maps.
func fields(v reflect.Value) map[string]any {
	out := map[string]any{}
	for i := range v.NumField() {
		f, fv := v.Type().Field(i), v.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if key == "" || key == "-" || fv.IsZero() {
			continue
		}
		if fv.Kind() == reflect.Struct {
			out[key] = fields(fv)
		} else {
			out[key] = fv.Interface()
		}
	}
	return out
}
