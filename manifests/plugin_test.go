package manifests

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const echoManifest = `# the echo plugin
[plugin]
name = "echo"
version = "0.1.0"
description = "echoes events"
kinds = ["policy", "tool"]

[grants]
subscribe = ["kairo.user.>", "kairo.tick"]
publish = ["echo.>"]
call = ["events.query", "llm.complete"]

[grants.wasi]
fs = []
env = ["LANG"]

[limits]
memory = "16MiB"
deadline = "50ms"

[config]
greeting = "hi"
times = 3
`

func TestLoadPlugin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "echo.toml")
	if err := os.WriteFile(path, []byte(echoManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPlugin(path)
	if err != nil {
		t.Fatal(err)
	}
	if p.File != path || p.Trusted || p.Plugin.Name != "echo" || p.Plugin.Version != "0.1.0" ||
		!slices.Equal(p.Plugin.Kinds, []string{"policy", "tool"}) {
		t.Fatalf("plugin = %+v", p.Plugin)
	}
	g := p.Grants
	if !slices.Equal(g.Subscribe, []string{"kairo.user.>", "kairo.tick"}) || !slices.Equal(g.Publish, []string{"echo.>"}) ||
		!slices.Equal(g.Call, []string{"events.query", "llm.complete"}) || len(g.WASI.FS) != 0 || !slices.Equal(g.WASI.Env, []string{"LANG"}) {
		t.Fatalf("grants = %+v", g)
	}
	if p.Limits.MemoryPages() != 256 || p.Limits.DeadlineDuration() != 50*time.Millisecond {
		t.Fatalf("limits = %d pages, %v", p.Limits.MemoryPages(), p.Limits.DeadlineDuration())
	}
	if p.Config["greeting"] != "hi" || p.Config["times"] != int64(3) {
		t.Fatalf("config = %v", p.Config)
	}
}

func TestParsePluginMinimal(t *testing.T) {
	p, err := ParsePlugin("min.toml", []byte("[plugin]\nname = \"min\"\nkinds = [\"input\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	// Nothing listed, nothing granted; limits left to the host.
	if p.Grants.Subscribe != nil || p.Grants.Publish != nil || p.Grants.Call != nil ||
		p.Limits.MemoryPages() != 0 || p.Limits.DeadlineDuration() != 0 || p.Config != nil {
		t.Fatalf("plugin = %+v", p)
	}
	if p, _ := ParsePlugin("min.toml", []byte("[plugin]\nname = \"min\"\nkinds = [\"input\"]\n[limits]\nmemory = 100000\n")); p.Limits.MemoryPages() != 2 {
		t.Fatalf("100000 bytes = %d pages; want 2 (rounded up)", p.Limits.MemoryPages())
	}
}

// Every error names the file, the line and the key, and says what is wrong.
func TestParsePluginErrors(t *testing.T) {
	head := "[plugin]\nname = \"p\"\nkinds = [\"policy\"]\n"
	cases := []struct {
		name, text string
		want       string // file:line: key: ...
	}{
		{"unknown key", head + "[grants]\nexec = [\"x\"]\n", "p.toml:5: grants.exec: unknown key"},
		{"trusted in the manifest", head + "trusted = true\n", "p.toml:4: plugin.trusted: unknown key"},
		{"unknown table", head + "[net]\nudp = true\n", "p.toml:4: net: unknown table or key"},
		{"wrong type", head + "[grants]\ncall = \"events.query\"\n", "p.toml:5: grants.call: \"events.query\" is a string, want an array"},
		{"bad kind", "[plugin]\nname = \"p\"\nkinds = [\"daemon\"]\n", `p.toml:3: plugin.kinds: kind "daemon" is unknown`},
		{"no kinds", "[plugin]\nname = \"p\"\n", "p.toml:1: plugin.kinds: missing"},
		{"name differs from the file", "[plugin]\nname = \"q\"\nkinds = [\"tool\"]\n", `p.toml:2: plugin.name: "q" differs from the file's name "p"`},
		{"bad name", "[plugin]\nname = \"P Q\"\nkinds = [\"tool\"]\n", `p.toml:2: plugin.name: "P Q" is not a plugin name`},
		{"bad pattern", head + "[grants]\npublish = [\"a.>.b\"]\n", `p.toml:5: grants.publish: invalid subject "a.>.b": '>' must be the last token`},
		{"bad method", head + "[grants]\ncall = [\"events query\"]\n", `p.toml:5: grants.call: method "events query" holds whitespace`},
		{"relative wasi path", head + "[grants.wasi]\nfs = [\"data\"]\n", `p.toml:5: grants.wasi.fs: "data" is not an absolute path`},
		{"bad size", head + "[limits]\nmemory = \"16M\"\n", "p.toml:5: limits.memory"},
		{"memory too small", head + "[limits]\nmemory = \"1KiB\"\n", "p.toml:5: limits.memory: 1024 bytes is out of range"},
		{"bad deadline", head + "[limits]\ndeadline = \"50\"\n", `p.toml:5: limits.deadline: deadline "50" is not a positive duration`},
		{"syntax", head + "[grants\n", "p.toml:5:8: plugin: TOML syntax"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParsePlugin("p.toml", []byte(c.text))
			var e *Error
			if !errors.As(err, &e) || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("err = %v\nwant an *Error starting %q", err, c.want)
			}
		})
	}
}

// A plugin's config is free-form: tables and arrays of tables at any depth,
// in the manifest and in kairo.toml's override, which replaces its keys.
func TestNestedConfig(t *testing.T) {
	m, err := ParsePlugin("p.toml", []byte("[plugin]\nname = \"p\"\nkinds = [\"input\"]\n[config]\nx = 1\nkeep = true\n[config.sub]\ny = [1, 2]\n[[config.timers]]\nname = \"a\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := m.Config["sub"].(map[string]any)
	timers, _ := m.Config["timers"].([]map[string]any)
	if sub == nil || len(timers) != 1 || timers[0]["name"] != "a" {
		t.Fatalf("config = %#v", m.Config)
	}
	n, err := m.Narrow(PluginOverride{Config: map[string]any{"x": int64(2)}})
	if err != nil {
		t.Fatal(err)
	}
	if n.Config["x"] != int64(2) || n.Config["keep"] != true || m.Config["x"] != int64(1) {
		t.Fatalf("narrowed config = %#v, manifest's = %#v", n.Config, m.Config)
	}
}

func TestNarrow(t *testing.T) {
	m, err := ParsePlugin("echo.toml", []byte(echoManifest))
	if err != nil {
		t.Fatal(err)
	}
	no := false
	op := PluginOverride{
		Enabled:   &no,
		Trusted:   true,
		Subscribe: []string{"kairo.user.message"},
		Publish:   []string{"echo.reply.*"},
		Call:      []string{}, // none at all
		Memory:    8 * MiB,
	}
	n, err := m.Narrow(op)
	if err != nil {
		t.Fatal(err)
	}
	if !n.Trusted || !slices.Equal(n.Grants.Subscribe, op.Subscribe) || !slices.Equal(n.Grants.Publish, op.Publish) ||
		n.Grants.Call == nil || len(n.Grants.Call) != 0 || !slices.Equal(n.Grants.WASI.Env, []string{"LANG"}) ||
		n.Limits.MemoryPages() != 128 || n.Limits.Deadline != "50ms" || !op.Disabled() {
		t.Fatalf("narrowed = %+v trusted %v", n.Grants, n.Trusted)
	}
	// The manifest is left as it was.
	if len(m.Grants.Call) != 2 || m.Trusted {
		t.Fatalf("the manifest changed: %+v", m.Grants)
	}
	if n, err := m.Narrow(PluginOverride{}); err != nil || !slices.Equal(n.Grants.Call, m.Grants.Call) {
		t.Fatalf("an empty override: %+v, %v; want the manifest's grants", n, err)
	}
}

// The operator can take grants away, never add them.
func TestNarrowCannotWiden(t *testing.T) {
	m, err := ParsePlugin("echo.toml", []byte(echoManifest))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		op   PluginOverride
		says string
	}{
		{"a method", PluginOverride{Call: []string{"events.query", "process.spawn"}}, `plugins.echo.call: "process.spawn" is not granted by the manifest echo.toml`},
		{"a wider pattern", PluginOverride{Publish: []string{"echo.>", ">"}}, `plugins.echo.publish: ">" is not granted`},
		{"a sibling subject", PluginOverride{Subscribe: []string{"kairo.agent.>"}}, `plugins.echo.subscribe: "kairo.agent.>" is not granted`},
		{"a file-system path", PluginOverride{WASIFS: []string{"/etc"}}, `plugins.echo.wasi_fs: "/etc" is not granted by the manifest echo.toml (it grants none)`},
		{"an environment variable", PluginOverride{WASIEnv: []string{"HOME"}}, `plugins.echo.wasi_env: "HOME" is not granted`},
		{"an invalid pattern", PluginOverride{Publish: []string{"echo.>.x"}}, `plugins.echo.publish: "echo.>.x" is not granted`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := m.Narrow(c.op)
			if err == nil || n != nil || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "can only narrow") {
				t.Fatalf("Narrow = %v, %v; want an error saying %q", n, err, c.says)
			}
		})
	}
}
