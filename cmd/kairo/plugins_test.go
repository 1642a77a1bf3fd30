package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/manifests"
)

// kairo up loads a drop-in plugin with its baseline, not what its manifest
// asks: kairo plugins lists what it requested; kairo plugins grant grants
// it, and it serves events, after a restart of the daemon too; kairo plugin
// inspect reads a module; a module without a manifest is listed as
// refused, saying what to do.
func TestPluginsCommands(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	plugins := filepath.Join(home, "plugins")
	buildPlugin(t, plugins, "echo")
	if err := os.WriteFile(filepath.Join(plugins, "bare.wasm"), []byte("\x00asm\x01\x00\x00\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startUp(t, home)

	// Its subscription to demo.> was refused: one denial.
	r := kairo(t, home, "plugins")
	if r.code != 0 || !regexpMatch(`echo\s+0\.1\.0\s+policy\s+running\s+\S+\s+no\s+0\s+0\s+1\s+subscribe plugin\.echo\.>; publish plugin\.echo\.>\n`, r.stdout) ||
		!strings.Contains(r.stdout, "echo requested, not granted: subscribe demo.>; publish echo.>") ||
		!strings.Contains(r.stdout, "bare: "+filepath.Join(plugins, "bare.wasm")+" has no manifest: put bare.toml beside it") {
		t.Fatalf("kairo plugins:\n%s", r)
	}
	if r := kairo(t, home, "plugins", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"requested":{"subscribe":["demo.>"],"publish":["echo.>"],"call":[],"wasiFs":[],"wasiEnv":[]}`) {
		t.Fatalf("kairo plugins --json:\n%s", r)
	}
	if r := kairo(t, home, "plugins", "grant", "echo", "subscribe=demo.>", "pub=echo.>"); r.code != 2 || !strings.Contains(r.stderr, `unknown key "pub"`) {
		t.Fatalf("grant with a bad key:\n%s", r)
	}
	r = kairo(t, home, "plugins", "grant", "echo", "subscribe=demo.>", "publish=echo.>")
	if r.code != 0 || !strings.Contains(r.stdout, "granted; echo now has: subscribe plugin.echo.>,demo.>; publish plugin.echo.>,echo.>") {
		t.Fatalf("kairo plugins grant:\n%s", r)
	}
	if r := kairo(t, home, "events", "replay", "kairo.plugin.granted"); r.code != 0 || !strings.Contains(r.stdout, "kairo.plugin.granted host") {
		t.Fatalf("the grant is not in the log:\n%s", r)
	}

	// The grant is the log's: it holds after a restart.
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d", code)
	}
	d = startUp(t, home)
	r = kairo(t, home, "plugins")
	if r.code != 0 || !regexpMatch(`echo\s+0\.1\.0\s+policy\s+running\s+\S+\s+no\s+0\s+0\s+0\s+subscribe plugin\.echo\.>,demo\.>; publish plugin\.echo\.>,echo\.>\n`, r.stdout) ||
		strings.Contains(r.stdout, "echo requested") {
		t.Fatalf("kairo plugins after a restart:\n%s", r)
	}
	if r := kairo(t, home, "events", "publish", "demo.hello", `{"n": 1}`); r.code != 0 {
		t.Fatal(r)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r = kairo(t, home, "events", "replay", "echo.>")
		if strings.Contains(r.stdout, `echo.demo.hello plugin/echo {"n":1}`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no echo:\n%s", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The error names the command the person typed, not the method's
	// wire name (plugins.restart).
	if r := kairo(t, home, "plugins", "restart", "nobody"); r.code != 1 || !strings.Contains(r.stderr, `kairo: kairo plugins restart: `) || !strings.Contains(r.stderr, `no plugin "nobody"`) || strings.Contains(r.stderr, "plugins.restart:") {
		t.Fatalf("restart nobody:\n%s", r)
	}

	r = kairo(t, home, "plugin", "inspect", filepath.Join(plugins, "echo.wasm"))
	if r.code != 0 || !strings.Contains(r.stdout, "abi\tversion 1 (this host speaks 1)") ||
		!regexpMatch(`kairo_handle\s+func \(i32\) -> \(i64\)`, r.stdout) || !regexpMatch(`kairo\.publish\s+func \(i32, i32\) -> \(i32\)`, r.stdout) ||
		!strings.Contains(r.stdout, "grants: subscribe demo.>; publish echo.>") || !strings.Contains(r.stdout, "ok: the host can load it") {
		t.Fatalf("inspect echo:\n%s", r)
	}
	// Each import is listed once, however many times the module imports it.
	seen := map[string]bool{}
	for _, line := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[0], "wasi_snapshot_preview1.") {
			if seen[f[0]] {
				t.Fatalf("inspect lists %s twice:\n%s", f[0], r)
			}
			seen[f[0]] = true
		}
	}
	if !seen["wasi_snapshot_preview1.fd_write"] {
		t.Fatalf("inspect lists no fd_write:\n%s", r)
	}
	r = kairo(t, home, "plugin", "inspect", filepath.Join(plugins, "bare.wasm"))
	if r.code != 1 || !strings.Contains(r.stdout, "manifest: none:") || !strings.Contains(r.stdout, "does not export _initialize") {
		t.Fatalf("inspect bare:\n%s", r)
	}
	if r := kairo(t, home, "plugin", "inspect", filepath.Join(home, "missing.wasm")); r.code != 1 || !strings.Contains(r.stderr, "no such file") {
		t.Fatalf("inspect a missing file:\n%s", r)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d", code)
	}
}

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }

// grantAsManifest returns [plugins.NAME.grants] tables for kairo.toml that
// grant each of the plugins, built from plugins/NAME into a drop-in folder,
// what its manifest asks: a test's stand-in for the trust a built-in has.
func grantAsManifest(t *testing.T, names ...string) string {
	t.Helper()
	var b strings.Builder
	for _, name := range names {
		m, err := manifests.LoadPlugin(filepath.Join("..", "..", "plugins", name, name+".toml"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "\n[plugins.%s.grants]\ncall = %s\npublish = %s\nsubscribe = %s\n", name, tomlList(m.Grants.Call), tomlList(m.Grants.Publish), tomlList(m.Grants.Subscribe))
	}
	return b.String()
}

func tomlList(l []string) string {
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
