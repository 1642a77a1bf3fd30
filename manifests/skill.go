package manifests

import (
	"github.com/kairo-os/kairo/abi"

	"fmt"
	"maps"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// Skill is a binary skill's manifest, skill.toml: a native program, the
// params an agent fills in to call it, and what the sandbox lets it touch.
// Nothing is granted that the manifest does not list: an empty [fs], [net],
// [ipc] or [env] grants nothing.
//
// Paths in [fs] and net.unix are absolute or start with one of three
// variables, expanded by ExpandPath when the skill runs: $SKILL_DIR (the
// folder of skill.toml), $WORK (the run's workspace) and $TMP (its
// temporary folder).
type Skill struct {
	File string `toml:"-"` // the manifest's path, as given to LoadSkill or ParseSkill
	Dir  string `toml:"-"` // the manifest's folder, absolute: $SKILL_DIR

	Skill    SkillInfo        `toml:"skill"`
	Params   map[string]Param `toml:"params"`
	FS       FSGrants         `toml:"fs"`
	Net      NetGrants        `toml:"net"`
	IPC      IPCGrants        `toml:"ipc"`
	Env      EnvGrants        `toml:"env"`
	Limits   SkillLimits      `toml:"limits"`
	Sandbox  SkillSandbox     `toml:"sandbox"`
	Progress []ProgressRule   `toml:"progress"`
	Approval SkillApproval    `toml:"approval"`
	Secrets  SecretGrants     `toml:"secrets"`
}

// SkillInfo is the [skill] table.
type SkillInfo struct {
	// Name is the skill's name and the agent's tool name: lower-case
	// letters, digits, "_" and "-", starting with a letter or a digit, at
	// most 64 bytes.
	Name        string `toml:"name"`
	Version     string `toml:"version"`
	Description string `toml:"description"` // what the agent reads to choose the tool
	// Command is the program and its arguments. Command[0] is an absolute
	// path or one under $SKILL_DIR. In the other words, {name} is the
	// value of param name (see Argv).
	Command []string `toml:"command"`
}

// Param is a [params.NAME] table: one argument of the skill, and one
// property of its tool's JSON schema.
type Param struct {
	Type        string `toml:"type"` // ParamString (when left out), ParamInteger, ParamNumber or ParamBoolean
	Description string `toml:"description"`
	// Required is true unless the manifest sets a default or says
	// required = false.
	Required bool `toml:"required"`
	// Default is the value when the param is not given: a string, an
	// int64, a float64 or a bool, as Type says; nil for none.
	Default any `toml:"default"`
	// Enum lists the values allowed, written as strings ("1", "true").
	Enum []string `toml:"enum"`
}

// [Param] types, as JSON schema names them.
const (
	ParamString  = "string"
	ParamInteger = "integer"
	ParamNumber  = "number"
	ParamBoolean = "boolean"
)

// FSGrants is the [fs] table. Read grants reading files and listing
// folders under each path; Write grants creating, changing and removing
// under each path; Exec grants executing the files under each path.
type FSGrants struct {
	Read  []string `toml:"read"`
	Write []string `toml:"write"`
	Exec  []string `toml:"exec"`
}

// NetGrants is the [net] table.
type NetGrants struct {
	ConnectTCP []uint16 `toml:"connect_tcp"` // ports the skill may connect to
	BindTCP    []uint16 `toml:"bind_tcp"`    // ports it may listen on
	UDP        bool     `toml:"udp"`
	Unix       []string `toml:"unix"` // unix sockets it may connect to, as paths
	// Hosts are the host names the skill may reach, through the kernel's
	// egress proxy for its tree (HTTPS_PROXY): "api.github.com:443",
	// "*.pythonhosted.org" (80 and 443 when no port is given), or an IP
	// literal. The proxy resolves the names; the sandbox itself may
	// connect only to the proxy.
	Hosts []string `toml:"hosts"`
}

// IPCGrants is the [ipc] table: the kernel methods and event subjects the
// skill may use over its IPC descriptor. Empty grants none.
type IPCGrants struct {
	Call      []string `toml:"call"`      // methods, such as "events.publish"
	Publish   []string `toml:"publish"`   // subjects or patterns
	Subscribe []string `toml:"subscribe"` // subjects or patterns
}

// EnvGrants is the [env] table: the skill's whole environment, besides
// what the sandbox itself sets.
type EnvGrants struct {
	Pass []string          `toml:"pass"` // variables copied from the caller's environment
	Set  map[string]string `toml:"set"`  // variables set; $SKILL_DIR, $WORK and $TMP are expanded
}

// SkillLimits is the [limits] table. A key left out is no limit; zero is
// refused, so that nobody writes 0 meaning "none allowed".
type SkillLimits struct {
	CPUSeconds  int  `toml:"cpu_seconds"`
	WallSeconds int  `toml:"wall_seconds"`
	Memory      Size `toml:"memory"` // address space
	Processes   int  `toml:"processes"`
	FileSize    Size `toml:"file_size"` // the largest file it may write
	OpenFiles   int  `toml:"open_files"`
	OutputBytes Size `toml:"output_bytes"` // of stdout and stderr; the rest is dropped
	OutputRate  Rate `toml:"output_rate"`
}

// SkillSandbox is the [sandbox] table.
type SkillSandbox struct {
	// MinLandlockABI refuses to run the skill on a kernel whose Landlock
	// is older; 0 leaves it to the sandbox.
	MinLandlockABI int  `toml:"min_landlock_abi"`
	PTY            bool `toml:"pty"` // run on a pseudo-terminal
}

// ProgressRule is a [[progress]] table: a regular expression matched
// against each line the skill writes. Its named groups are what the line
// reports, such as (?P<percent>\d+) or (?P<time>\S+).
type ProgressRule struct {
	Pattern string `toml:"pattern"`
	re      *regexp.Regexp
}

// Regexp is Pattern compiled; nil until the manifest validated.
func (r ProgressRule) Regexp() *regexp.Regexp { return r.re }

// The variables a path in a skill manifest may start with, and the keys
// of the vars maps that give their values.
const (
	VarSkillDir = "SKILL_DIR"
	VarWork     = "WORK"
	VarTmp      = "TMP"
)

var pathVars = []string{VarSkillDir, VarWork, VarTmp}

const pathVarsHelp = "$SKILL_DIR (the skill's folder), $WORK (the run's workspace) or $TMP (its temporary folder)"

var (
	skillNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	identRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// A placeholder is {name}; {{name}} is the literal text {name}.
	placeholderRE = regexp.MustCompile(`\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}`)
)

// maxSkillName is the longest tool name agents' APIs accept.
const maxSkillName = 64

// LoadSkill reads and validates the skill manifest at path. Every problem
// is an [*Error], or several joined, naming the file, the line and the key.
// It reads only a regular file of at most [MaxManifestSize] bytes, and its
// errors quote nothing of a file that is not TOML (see readFile).
func LoadSkill(path string) (*Skill, error) {
	text, err := readFile(path, MaxManifestSize)
	if err != nil {
		return nil, fmt.Errorf("read skill manifest: %w", err)
	}
	return ParseSkill(path, text)
}

// ParseSkill reads and validates the text of the skill manifest file; file
// names it in errors and places $SKILL_DIR in its folder.
func ParseSkill(file string, text []byte) (*Skill, error) {
	if err := checkSize(file, text, MaxManifestSize); err != nil {
		return nil, err
	}
	s := &Skill{File: file, Dir: filepath.Dir(file)}
	if abs, err := filepath.Abs(s.Dir); err == nil {
		s.Dir = abs
	}
	md, err := decode(file, text, s)
	if err != nil {
		return nil, err
	}
	c := &skillCheck{s: s, md: md, text: text}
	c.check()
	if len(c.errs) > 0 {
		slices.SortStableFunc(c.errs, func(a, b *Error) int { return a.Line - b.Line })
		return nil, joinErrors(append(c.errs, moreErrors(file, c.more)...))
	}
	return s, nil
}

// skillCheck validates a decoded Skill, filling in what the manifest left
// to defaults, and collects every problem.
type skillCheck struct {
	s    *Skill
	md   toml.MetaData
	text []byte
	errs []*Error
	more int // problems past maxErrors, counted, not reported

	params string // paramList, once made
}

func (c *skillCheck) bad(k toml.Key, format string, args ...any) {
	if len(c.errs) == maxErrors {
		c.more++
		return
	}
	c.errs = append(c.errs, &Error{
		File: c.s.File,
		Line: keyLine(c.text, k),
		Key:  keyString(k),
		Msg:  fmt.Sprintf(format, args...),
	})
}

func (c *skillCheck) check() {
	c.checkInfo()
	c.checkParams()
	c.checkCommand()
	c.checkFS()
	c.checkNet()
	c.checkIPC()
	c.checkEnv()
	c.checkLimits()
	c.checkApproval()
	c.checkSecrets()
	if c.s.Sandbox.MinLandlockABI < 0 {
		c.bad(toml.Key{"sandbox", "min_landlock_abi"}, "%d is negative; give a Landlock ABI version such as 4, or 0 to leave it to the sandbox", c.s.Sandbox.MinLandlockABI)
	}
	c.checkProgress()
}

func (c *skillCheck) checkInfo() {
	name := c.s.Skill.Name
	switch {
	case name == "":
		c.bad(toml.Key{"skill", "name"}, `is missing; name the skill in [skill], such as name = "transcode"`)
	case len(name) > maxSkillName:
		c.bad(toml.Key{"skill", "name"}, "%q is %d bytes long; agents take tool names of at most %d", name, len(name), maxSkillName)
	case !skillNameRE.MatchString(name):
		c.bad(toml.Key{"skill", "name"}, "%q is not a skill name; use lower-case letters, digits, _ and -, starting with a letter or a digit, such as %q", name, suggestName(name))
	}
}

// suggestName is name made into a valid skill name, for an example.
func suggestName(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case (r == '_' || r == '-' || r == ' ' || r == '.') && b.Len() > 0:
			b.WriteByte('-')
		}
	}
	if b.Len() == 0 {
		return "my-skill"
	}
	return b.String()
}

func (c *skillCheck) checkParams() {
	for _, name := range sortedKeys(c.s.Params) {
		p := c.s.Params[name]
		k := toml.Key{"params", name}
		if !identRE.MatchString(name) {
			c.bad(k, "%q is not a param name; use letters, digits and _, starting with a letter or _, such as %q", name, "output_file")
		}
		if p.Type == "" {
			p.Type = ParamString
		}
		switch p.Type {
		case ParamString, ParamInteger, ParamNumber, ParamBoolean:
		default:
			c.bad(append(k, "type"), "%q is not a param type; want %q, %q, %q or %q", p.Type, ParamString, ParamInteger, ParamNumber, ParamBoolean)
			c.s.Params[name] = p
			continue
		}
		if c.md.IsDefined("params", name, "enum") && len(p.Enum) == 0 {
			c.bad(append(k, "enum"), "is empty, which allows no value; list the values allowed or remove the key")
		}
		for i, v := range p.Enum {
			if err := p.checkValue(v, false); err != nil {
				c.bad(append(k, "enum", index(i)), "%v", err)
			}
		}
		if p.Default != nil {
			if d, ok := typedDefault(p.Type, p.Default); !ok {
				c.bad(append(k, "default"), "%s is %s, but the param is of type %q; write %s", tomlValue(p.Default), tomlKind(p.Default), p.Type, exampleOf(p.Type))
			} else if err := p.checkValue(formatValue(d), true); err != nil {
				c.bad(append(k, "default"), "%v", err)
			} else {
				p.Default = d
			}
		}
		if c.md.IsDefined("params", name, "required") {
			if p.Required && p.Default != nil {
				c.bad(append(k, "required"), "is true, but a param with a default is never missing; remove required or default")
			}
		} else {
			p.Required = p.Default == nil
		}
		c.s.Params[name] = p
	}
}

// typedDefault is a default as its param type holds it: an integer default
// of a number param is a float64.
func typedDefault(typ string, v any) (any, bool) {
	switch v := v.(type) {
	case string:
		return v, typ == ParamString
	case int64:
		if typ == ParamNumber {
			return float64(v), true
		}
		return v, typ == ParamInteger
	case float64:
		return v, typ == ParamNumber
	case bool:
		return v, typ == ParamBoolean
	}
	return v, false
}

func exampleOf(typ string) string {
	switch typ {
	case ParamInteger:
		return "an integer such as 10"
	case ParamNumber:
		return "a number such as 0.5"
	case ParamBoolean:
		return "true or false"
	}
	return `a string in quotes, such as "out.mp4"`
}

func (c *skillCheck) checkCommand() {
	cmd := c.s.Skill.Command
	if len(cmd) == 0 {
		c.bad(toml.Key{"skill", "command"}, `is missing; give the program and its arguments, such as command = ["/usr/bin/wc", "-l", "{file}"]`)
		return
	}
	used := map[string]bool{}
	for i, word := range cmd {
		// Only $SKILL_DIR is known when the command line is made.
		if name := firstVar(word, func(n string) bool { return n == VarWork || n == VarTmp }); i > 0 && name != "" {
			k := toml.Key{"skill", "command", index(i)}
			if name == VarWork {
				c.bad(k, "%q: $WORK is not expanded in the command; the command runs in $WORK, so write a path relative to it, such as \"out\"", word)
			} else {
				c.bad(k, "%q: $TMP is not expanded in the command; the command finds its temporary folder in the environment variable TMPDIR", word)
			}
		}
		for _, m := range placeholderRE.FindAllStringSubmatch(word, -1) {
			name := m[2]
			if name == "" { // {{name}}: literal
				continue
			}
			used[name] = true
			k := toml.Key{"skill", "command", index(i)}
			if i == 0 {
				c.bad(k, "the program cannot be a param ({%s}); name it", name)
			} else if _, ok := c.s.Params[name]; !ok {
				c.bad(k, "{%s} is not a declared param; declare [params.%s], fix the spelling (%s), or write {{%s}} for the literal text", name, name, c.paramList(), name)
			}
		}
	}
	for _, name := range sortedKeys(c.s.Params) {
		if !used[name] {
			c.bad(toml.Key{"params", name}, "is not used in skill.command; put {%s} where its value goes, or remove the param", name)
		}
	}
	if msg := checkProgram(cmd[0]); msg != "" {
		c.bad(toml.Key{"skill", "command", index(0)}, "%s", msg)
	} else if !placeholderRE.MatchString(cmd[0]) && !granted(cmd[0], c.s.FS.Exec) {
		c.bad(toml.Key{"skill", "command", index(0)}, "%q is not in fs.exec, so the sandbox would not run it; add it to fs.exec", cmd[0])
	}
}

func (c *skillCheck) paramList() string {
	if c.params == "" {
		c.params = "the skill declares none"
		if names := sortedKeys(c.s.Params); len(names) > maxErrors {
			c.params = fmt.Sprintf("params: %s and %d more", strings.Join(names[:maxErrors], ", "), len(names)-maxErrors)
		} else if len(names) > 0 {
			c.params = "params: " + strings.Join(names, ", ")
		}
	}
	return c.params
}

// checkProgram says what is wrong with the program of a command, or "".
func checkProgram(p string) string {
	if strings.HasPrefix(p, "$") {
		name, rest, _ := splitVar(p)
		if name == VarWork || name == VarTmp {
			return fmt.Sprintf("%q: the skill may write $%s, so a program there could be anything; ship the program in $SKILL_DIR or name an installed one", p, name)
		}
		if name != VarSkillDir || len(rest) < 2 || rest[0] != '/' {
			return fmt.Sprintf("%q: give the program's absolute path, or its path under $SKILL_DIR, such as \"$SKILL_DIR/run.sh\"", p)
		}
		return checkPath(p)
	}
	if !strings.HasPrefix(p, "/") {
		base := path.Base(p)
		return fmt.Sprintf("%q is not an absolute path; give the program's path, such as \"/usr/bin/%s\" (`command -v %s` prints it), or \"$SKILL_DIR/%s\" for one beside skill.toml", p, base, base, base)
	}
	return checkPath(p)
}

// granted reports whether p is one of grants or under one of them, read
// as text: a symbolic link is not followed.
func granted(p string, grants []string) bool {
	p = path.Clean(p)
	for _, g := range grants {
		g = path.Clean(g)
		if p == g || g == "/" || strings.HasPrefix(p, g+"/") {
			return true
		}
	}
	return false
}

// checkPath says what is wrong with a path of a grant, or "".
func checkPath(p string) string {
	rest := p
	switch {
	case p == "":
		return "is empty; give an absolute path, or one that starts with " + pathVarsHelp
	case p[0] == '$':
		name, after, ok := splitVar(p)
		if !ok || !isPathVar(name) {
			return fmt.Sprintf("%q: $%s is not a variable a path may use; start it with %s", p, name, pathVarsHelp)
		}
		if after != "" && after[0] != '/' {
			return fmt.Sprintf("%q: put a / after $%s, as in \"$%s/out\"", p, name, name)
		}
		rest = after
	case p[0] != '/':
		return fmt.Sprintf("%q is relative; give an absolute path, or start it with %s, such as \"$WORK/%s\"", p, pathVarsHelp, p)
	}
	if slices.Contains(strings.Split(rest, "/"), "..") {
		return fmt.Sprintf("%q goes up with \"..\"; name the folder itself", p)
	}
	if strings.Contains(rest, "$") {
		return fmt.Sprintf("%q: only a leading $SKILL_DIR, $WORK or $TMP is expanded; write the rest of the path out", p)
	}
	return ""
}

func (c *skillCheck) checkFS() {
	for _, g := range []struct {
		key   string
		paths []string
	}{{"read", c.s.FS.Read}, {"write", c.s.FS.Write}, {"exec", c.s.FS.Exec}} {
		for i, p := range g.paths {
			if msg := checkPath(p); msg != "" {
				c.bad(toml.Key{"fs", g.key, index(i)}, "%s", msg)
			}
		}
	}
}

func (c *skillCheck) checkNet() {
	for _, g := range []struct {
		key   string
		ports []uint16
	}{{"connect_tcp", c.s.Net.ConnectTCP}, {"bind_tcp", c.s.Net.BindTCP}} {
		for i, port := range g.ports {
			if port == 0 {
				c.bad(toml.Key{"net", g.key, index(i)}, "0 is not a port; give a port from 1 to 65535")
			}
		}
	}
	for i, p := range c.s.Net.Unix {
		if msg := checkPath(p); msg != "" {
			c.bad(toml.Key{"net", "unix", index(i)}, "%s", msg)
		}
	}
	for i, h := range c.s.Net.Hosts {
		if err := CheckEgressEntry(h); err != nil {
			c.bad(toml.Key{"net", "hosts", index(i)}, "%v, such as \"api.github.com:443\" or \"*.pythonhosted.org\"", err)
		}
	}
}

func (c *skillCheck) checkIPC() {
	for _, g := range []struct {
		key, what, example string
		names              []string
	}{
		{"call", "a kernel method", abi.MethodEventsPublish, c.s.IPC.Call},
		{"publish", "a subject", "skill.transcode.done", c.s.IPC.Publish},
		{"subscribe", "a subject or pattern", "kairo.process.>", c.s.IPC.Subscribe},
	} {
		for i, name := range g.names {
			if name == "" || strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
				c.bad(toml.Key{"ipc", g.key, index(i)}, "%q is not %s; write one without spaces, such as %q", name, g.what, g.example)
			}
		}
	}
}

func (c *skillCheck) checkEnv() {
	for i, name := range c.s.Env.Pass {
		if !identRE.MatchString(name) {
			c.bad(toml.Key{"env", "pass", index(i)}, "%q is not an environment variable name; use letters, digits and _, starting with a letter or _", name)
		} else if _, ok := c.s.Env.Set[name]; ok {
			c.bad(toml.Key{"env", "pass", index(i)}, "%s is also in env.set, which would win; keep one", name)
		}
	}
	for _, name := range sortedKeys(c.s.Env.Set) {
		k := toml.Key{"env", "set", name}
		if !identRE.MatchString(name) {
			c.bad(k, "%q is not an environment variable name; use letters, digits and _, starting with a letter or _", name)
		}
		if v := firstVar(c.s.Env.Set[name], func(n string) bool { return !isPathVar(n) }); v != "" {
			c.bad(k, "$%s is not expanded here, only %s; to pass %s from the caller's environment, list it in env.pass", v, pathVarsHelp, v)
		}
	}
}

func (c *skillCheck) checkSecrets() {
	others := map[string]string{}
	for _, v := range c.s.Env.Pass {
		others[v] = "env.pass"
	}
	for v := range c.s.Env.Set {
		others[v] = "env.set"
	}
	for _, p := range c.s.Secrets.check(others) {
		c.bad(append(toml.Key{"secrets"}, p.key...), "%s", p.msg)
	}
}

func (c *skillCheck) checkLimits() {
	l := c.s.Limits
	for _, n := range []struct {
		key string
		v   int
	}{
		{"cpu_seconds", l.CPUSeconds}, {"wall_seconds", l.WallSeconds},
		{"processes", l.Processes}, {"open_files", l.OpenFiles},
	} {
		switch {
		case n.v < 0:
			c.bad(toml.Key{"limits", n.key}, "%d is negative; give a limit of at least 1, or leave the key out for none", n.v)
		case n.v == 0 && c.md.IsDefined("limits", n.key):
			c.bad(toml.Key{"limits", n.key}, "0 is not a limit; give at least 1, or leave the key out for none")
		}
	}
	for _, z := range []struct {
		key string
		v   uint64
	}{
		{"memory", uint64(l.Memory)}, {"file_size", uint64(l.FileSize)},
		{"output_bytes", uint64(l.OutputBytes)}, {"output_rate", uint64(l.OutputRate)},
	} {
		if z.v == 0 && c.md.IsDefined("limits", z.key) {
			c.bad(toml.Key{"limits", z.key}, "0 is not a limit; leave the key out for none")
		}
	}
	if l.Memory > 0 && l.Memory < MiB {
		c.bad(toml.Key{"limits", "memory"}, "%s is too little to start a program; give at least 1MiB, such as \"512MiB\"", l.Memory)
	}
}

func (c *skillCheck) checkProgress() {
	for i := range c.s.Progress {
		r := &c.s.Progress[i]
		k := toml.Key{"progress", index(i), "pattern"}
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			c.bad(k, "%q does not compile: %v (write it in single quotes, 'like\\s+this', to keep backslashes as they are)", r.Pattern, err)
			continue
		}
		if !slices.ContainsFunc(re.SubexpNames(), func(n string) bool { return n != "" }) {
			c.bad(k, "%q has no named group; name what it captures, such as 'progress=(?P<percent>\\d+)%%'", r.Pattern)
			continue
		}
		r.re = re
	}
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// formatValue writes a param's default as its command words hold it.
func formatValue(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	return fmt.Sprint(v)
}
