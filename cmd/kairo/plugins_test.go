package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// kairo up loads a drop-in plugin, which serves events; kairo plugins lists
// it; kairo plugin inspect reads a module; a module without a manifest is
// listed as refused, saying what to do.
func TestPluginsCommands(t *testing.T) {
	home := t.TempDir()
	plugins := filepath.Join(home, "plugins")
	buildPlugin(t, plugins, "echo")
	if err := os.WriteFile(filepath.Join(plugins, "bare.wasm"), []byte("\x00asm\x01\x00\x00\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startUp(t, home)

	r := kairo(t, home, "plugins")
	if r.code != 0 || !regexpMatch(`echo\s+0\.1\.0\s+policy\s+running\s+\S+\s+no\s+0\s+0\s+0\s+subscribe demo\.>; publish echo\.>`, r.stdout) ||
		!strings.Contains(r.stdout, "bare: "+filepath.Join(plugins, "bare.wasm")+" has no manifest: put bare.toml beside it") {
		t.Fatalf("kairo plugins:\n%s", r)
	}
	if r := kairo(t, home, "events", "publish", "demo.hello", `{"n": 1}`); r.code != 0 {
		t.Fatal(r)
	}
	deadline := time.Now().Add(10 * time.Second)
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
	if r := kairo(t, home, "plugins", "restart", "nobody"); r.code != 1 || !strings.Contains(r.stderr, `no plugin "nobody"`) {
		t.Fatalf("restart nobody:\n%s", r)
	}

	r = kairo(t, home, "plugin", "inspect", filepath.Join(plugins, "echo.wasm"))
	if r.code != 0 || !strings.Contains(r.stdout, "abi\tversion 1 (this host speaks 1)") ||
		!regexpMatch(`kairo_handle\s+func \(i32\) -> \(i64\)`, r.stdout) || !regexpMatch(`kairo\.publish\s+func \(i32, i32\) -> \(i32\)`, r.stdout) ||
		!strings.Contains(r.stdout, "grants: subscribe demo.>; publish echo.>") || !strings.Contains(r.stdout, "ok: the host can load it") {
		t.Fatalf("inspect echo:\n%s", r)
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
