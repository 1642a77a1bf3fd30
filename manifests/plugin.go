package manifests

import (
	"github.com/kairo-os/kairo/abi"

	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Plugin is a Wasm plugin's manifest, NAME.toml beside NAME.wasm: what the
// plugin is, what it asks to reach through the host, and its config. A
// built-in's manifest is granted as it asks; a drop-in's only asks, and
// the operator grants ([PluginOverride.Grants]). Whether the host trusts the
// plugin (runs it without a deadline) is the operator's choice, never the
// manifest's: see [PluginOverride].
type Plugin struct {
	File string `toml:"-"` // the manifest's path, as given to LoadPlugin or ParsePlugin
	// Trusted is set by Narrow from the operator's override; a manifest
	// cannot set it.
	Trusted bool `toml:"-"`

	Plugin PluginMeta   `toml:"plugin"`
	Grants PluginGrants `toml:"grants"`
	Limits PluginLimits `toml:"limits"`
	// Config is the [config] table, passed to the plugin's init as
	// abi.PluginConfig. Its values are strings, integers (int64), floats
	// and booleans; nested tables and arrays are refused for now.
	Config map[string]any `toml:"config"`
}

// PluginMeta is the [plugin] table.
type PluginMeta struct {
	// Name is the plugin's name, the NAME of NAME.toml and NAME.wasm:
	// lower-case letters, digits, "_" and "-", at most 64 bytes.
	Name        string   `toml:"name"`
	Version     string   `toml:"version"`
	Description string   `toml:"description"`
	Kinds       []string `toml:"kinds"` // abi.KindPolicy ("policy"), "tool", "input"; at least one
}

// PluginGrants is the [grants] table. Empty grants nothing.
type PluginGrants struct {
	// Subscribe lists the subject patterns whose events the plugin may
	// receive ("kairo.user.>"): "*" is one token, ">" the rest.
	Subscribe []string `toml:"subscribe"`
	// Publish lists the subjects or patterns the plugin may publish on.
	Publish []string `toml:"publish"`
	// Call lists the kernel and host methods the plugin may call, by
	// exact name ("events.query").
	Call []string   `toml:"call"`
	WASI WASIGrants `toml:"wasi"`
}

// WASIGrants is the [grants.wasi] table: what the plugin reaches through
// WASI. Empty, the default, gives it no files and no environment.
type WASIGrants struct {
	FS  []string `toml:"fs"`  // absolute paths of folders it may read
	Env []string `toml:"env"` // variables copied from the host's environment
}

// PluginLimits is the [limits] table. A key left out takes the host's
// default.
type PluginLimits struct {
	// Memory caps the guest's memory; it is rounded up to whole 64 KiB
	// pages (see MemoryPages).
	Memory Size `toml:"memory"`
	// Deadline bounds each call into the plugin, as a Go duration ("50ms");
	// see DeadlineDuration.
	Deadline string `toml:"deadline"`
}

// WasmPageSize is the size of a WebAssembly memory page.
const WasmPageSize = 64 * KiB

// maxWasmPages is the most pages a 32-bit WebAssembly memory may have.
const maxWasmPages = 65536

// MemoryPages is Memory in 64 [KiB] pages, rounded up; 0 when left out.
func (l PluginLimits) MemoryPages() uint32 {
	return uint32((l.Memory + WasmPageSize - 1) / WasmPageSize)
}

// DeadlineDuration is Deadline parsed; 0 when left out. A manifest that
// validated always parses.
func (l PluginLimits) DeadlineDuration() time.Duration {
	d, _ := time.ParseDuration(l.Deadline)
	return d
}

// PluginOverride is what the operator says about one plugin, in kairo.toml
// as [plugins.NAME]. A grant list left out (nil) keeps the manifest's; a
// list set, even empty, replaces it and may only narrow it: each entry must
// be covered by the manifest's (see Narrow). What the plugin gets beyond
// its baseline is Grants, [plugins.NAME.grants]: a drop-in plugin's
// manifest only asks, the operator grants.
type PluginOverride struct {
	// Grants are the operator's grants to the plugin, added to its
	// baseline: for a drop-in, its own namespace and [plugin_limits] public; for a
	// built-in, its manifest's.
	Grants OperatorGrants `toml:"grants"`
	// Enabled false keeps the plugin from loading; nil (left out) loads it.
	Enabled *bool `toml:"enabled"`
	// Trusted runs the plugin without deadline enforcement.
	Trusted   bool     `toml:"trusted"`
	Subscribe []string `toml:"subscribe"`
	Publish   []string `toml:"publish"`
	Call      []string `toml:"call"`
	WASIFS    []string `toml:"wasi_fs"`
	WASIEnv   []string `toml:"wasi_env"`
	// Memory and Deadline replace the manifest's limits when set.
	Memory   Size   `toml:"memory"`
	Deadline string `toml:"deadline"`
	// Config is laid over the manifest's [config]: a key here replaces
	// the manifest's.
	Config map[string]any `toml:"config"`
}

// OperatorGrants is [plugins.NAME.grants]: what the operator grants a
// plugin, whatever its manifest asks.
type OperatorGrants struct {
	Call      []string `toml:"call"`      // exact method names
	Publish   []string `toml:"publish"`   // subjects or patterns
	Subscribe []string `toml:"subscribe"` // patterns
	WASIFS    []string `toml:"wasi_fs"`   // absolute folders it may read
	WASIEnv   []string `toml:"wasi_env"`  // variables copied from the daemon's environment
}

// Check says what is wrong with each entry, as "KEY: problem", keys
// relative to the table (such as "publish").
func (g OperatorGrants) Check() []string {
	var out []string
	for key, list := range map[string][]string{"subscribe": g.Subscribe, "publish": g.Publish} {
		for _, pat := range list {
			if err := abi.ValidatePattern(pat); err != nil {
				out = append(out, key+": "+err.Error())
			}
		}
	}
	for _, meth := range g.Call {
		if err := checkMethod(meth); err != nil {
			out = append(out, "call: "+err.Error())
		}
	}
	for _, dir := range g.WASIFS {
		if !filepath.IsAbs(dir) {
			out = append(out, fmt.Sprintf("wasi_fs: %q is not an absolute path", dir))
		}
	}
	for _, v := range g.WASIEnv {
		if !identRE.MatchString(v) {
			out = append(out, fmt.Sprintf("wasi_env: %q is not an environment variable name", v))
		}
	}
	slices.Sort(out)
	return out
}

// Disabled reports whether the operator turned the plugin off.
func (o PluginOverride) Disabled() bool { return o.Enabled != nil && !*o.Enabled }

// maxMethodName bounds a method name, as the host does at its call import.
const maxMethodName = 256

// LoadPlugin reads and validates the plugin manifest at path. Every
// problem is an [*Error], or several joined, naming the file, the line and
// the key.
func LoadPlugin(path string) (*Plugin, error) {
	text, err := readFile(path, MaxManifestSize)
	if err != nil {
		return nil, fmt.Errorf("read plugin manifest: %w", err)
	}
	return ParsePlugin(path, text)
}

// ParsePlugin reads and validates the text of the plugin manifest file.
// When file ends in ".toml", [plugin] name must be its base name, so that
// NAME.toml describes NAME.wasm.
func ParsePlugin(file string, text []byte) (*Plugin, error) {
	if err := checkSize(file, text, MaxManifestSize); err != nil {
		return nil, err
	}
	p := &Plugin{File: file}
	if err := decodeFile(file, text, p); err != nil {
		return nil, err
	}
	var errs []*Error
	more := 0
	bad := func(key, format string, args ...any) {
		if len(errs) == maxErrors {
			more++
			return
		}
		errs = append(errs, &Error{File: file, Line: keyLine(text, splitKey(key)), Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	m := p.Plugin
	switch {
	case m.Name == "":
		bad("plugin.name", "missing; name the plugin as its files are named (NAME.toml, NAME.wasm)")
	case len(m.Name) > maxSkillName || !skillNameRE.MatchString(m.Name):
		bad("plugin.name", "%q is not a plugin name: use lower-case letters, digits, \"_\" and \"-\", starting with a letter or a digit, at most %d bytes", m.Name, maxSkillName)
	default:
		if base, ok := strings.CutSuffix(filepath.Base(file), ".toml"); ok && base != m.Name {
			bad("plugin.name", "%q differs from the file's name %q; a manifest NAME.toml describes the plugin NAME (NAME.wasm)", m.Name, base)
		}
	}
	if len(m.Kinds) == 0 {
		bad("plugin.kinds", "missing; say what the plugin is: one or more of %q, %q, %q", kindPolicy, kindTool, kindInput)
	}
	for i, k := range m.Kinds {
		switch {
		case k != kindPolicy && k != kindTool && k != kindInput:
			bad("plugin.kinds", "kind %q is unknown; use %q, %q or %q", k, kindPolicy, kindTool, kindInput)
		case slices.Index(m.Kinds, k) < i:
			bad("plugin.kinds", "kind %q is listed twice", k)
		}
	}
	for key, list := range map[string][]string{"grants.subscribe": p.Grants.Subscribe, "grants.publish": p.Grants.Publish} {
		for _, pat := range list {
			if err := abi.ValidatePattern(pat); err != nil {
				bad(key, "%v", err)
			}
		}
	}
	for _, meth := range p.Grants.Call {
		if err := checkMethod(meth); err != nil {
			bad("grants.call", "%v", err)
		}
	}
	for _, dir := range p.Grants.WASI.FS {
		if !filepath.IsAbs(dir) {
			bad("grants.wasi.fs", "%q is not an absolute path", dir)
		}
	}
	for _, v := range p.Grants.WASI.Env {
		if !identRE.MatchString(v) {
			bad("grants.wasi.env", "%q is not an environment variable name", v)
		}
	}
	if msg := checkPluginLimits(p.Limits.Memory, p.Limits.Deadline); msg != "" {
		key := "limits.memory"
		if strings.HasPrefix(msg, "deadline") {
			key = "limits.deadline"
		}
		bad(key, "%s", msg)
	}
	if len(errs) > 0 {
		slices.SortStableFunc(errs, func(a, b *Error) int { return a.Line - b.Line })
		return nil, joinErrors(append(errs, moreErrors(file, more)...))
	}
	return p, nil
}

// The plugin kinds, as abi names them (manifests does not import abi).
const (
	kindPolicy = "policy"
	kindTool   = "tool"
	kindInput  = "input"
)

func checkMethod(m string) error {
	switch {
	case m == "":
		return fmt.Errorf("an empty method name")
	case len(m) > maxMethodName:
		return fmt.Errorf("method %.32q… is longer than %d bytes", m, maxMethodName)
	case !utf8.ValidString(m) || strings.ContainsFunc(m, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return fmt.Errorf("method %q holds whitespace or a control character", m)
	}
	return nil
}

// checkPluginLimits says what is wrong with a memory limit or a deadline,
// or returns "". A message about the deadline starts with "deadline".
func checkPluginLimits(memory Size, deadline string) string {
	if memory != 0 && (memory < WasmPageSize || memory > maxWasmPages*WasmPageSize) {
		return fmt.Sprintf("%d bytes is out of range; want from 64KiB (one page) to 4GiB, such as \"64MiB\"", memory)
	}
	if deadline != "" {
		d, err := time.ParseDuration(deadline)
		if err != nil || d <= 0 {
			return fmt.Sprintf("deadline %q is not a positive duration; write it as \"50ms\", \"2s\"", deadline)
		}
	}
	return ""
}

// Narrow returns the plugin as the operator's override leaves it: a
// copy with the grants the override lists, its limits and Trusted. It
// refuses an override that would widen a grant, naming the entry the
// manifest does not cover; the operator can take away, never add.
func (m *Plugin) Narrow(op PluginOverride) (*Plugin, error) {
	n := *m
	n.Trusted = op.Trusted
	n.Config = m.Config // shared: the host never changes it
	if len(op.Config) > 0 {
		n.Config = maps.Clone(m.Config)
		if n.Config == nil {
			n.Config = map[string]any{}
		}
		maps.Copy(n.Config, op.Config)
	}
	var errs []error
	narrow := func(key string, have []string, want []string, covers func(grant, entry string) bool) []string {
		if want == nil {
			return slices.Clone(have)
		}
		for _, e := range want {
			if !slices.ContainsFunc(have, func(g string) bool { return covers(g, e) }) {
				errs = append(errs, fmt.Errorf("plugins.%s.%s: %q is not granted by the manifest %s (it grants %s); kairo.toml can only narrow a plugin's grants",
					m.Plugin.Name, key, e, m.File, listOrNone(have)))
			}
		}
		return slices.Clone(want)
	}
	covers := func(g, p string) bool { return abi.ValidatePattern(p) == nil && abi.Covers(g, p) }
	same := func(g, e string) bool { return g == e }
	under := func(g, e string) bool {
		rel, err := filepath.Rel(g, e)
		return err == nil && filepath.IsAbs(e) && rel != ".." && !strings.HasPrefix(rel, "../")
	}
	n.Grants.Subscribe = narrow("subscribe", m.Grants.Subscribe, op.Subscribe, covers)
	n.Grants.Publish = narrow("publish", m.Grants.Publish, op.Publish, covers)
	n.Grants.Call = narrow("call", m.Grants.Call, op.Call, same)
	n.Grants.WASI.FS = narrow("wasi_fs", m.Grants.WASI.FS, op.WASIFS, under)
	n.Grants.WASI.Env = narrow("wasi_env", m.Grants.WASI.Env, op.WASIEnv, same)
	if msg := checkPluginLimits(op.Memory, op.Deadline); msg != "" {
		errs = append(errs, fmt.Errorf("plugins.%s: %s", m.Plugin.Name, msg))
	}
	if op.Memory != 0 {
		n.Limits.Memory = op.Memory
	}
	if op.Deadline != "" {
		n.Limits.Deadline = op.Deadline
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &n, nil
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return fmt.Sprintf("%q", l)
}
