package wasmwarm

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kairo-os/kairo/host/wasm"
	"github.com/kairo-os/kairo/internal/wasmbuild"
)

// A module warmed for a test binary is read from the cache by the test's
// own engine, not compiled again: preparing it adds no entry to the cache
// (a miss would file a new one, and cost the test the race detector's
// compile Warm is there to spare). The warming itself is the control: it
// files the entries, where this binary's wazero looks.
func TestWarmedModuleIsReadFromTheCache(t *testing.T) {
	dir := t.TempDir()
	if err := wasmbuild.Plugin("echo", dir); err != nil {
		t.Fatal(err)
	}
	mod := filepath.Join(dir, "echo.wasm")
	cache := filepath.Join(dir, "cache")
	if err := Warm(cache, Module{Path: mod, Trusted: true}); err != nil {
		t.Fatal(err)
	}
	filed := filepath.Join(cache, "wazero-"+wazeroVersion()+"-*")
	before, _ := filepath.Glob(filepath.Join(filed, "*"))
	if len(before) == 0 {
		t.Fatalf("Warm filed nothing under %s", filed)
	}
	e, err := wasm.NewEngine(wasm.EngineConfig{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	b, err := os.ReadFile(mod)
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.Prepare(context.Background(), b, wasm.InstanceConfig{Name: "echo", Trusted: true})
	if err != nil {
		t.Fatal(err)
	}
	m.Release()
	after, _ := filepath.Glob(filepath.Join(filed, "*"))
	if len(after) != len(before) {
		t.Fatalf("the cache held %d entries after Warm and %d after the test's engine prepared the module: it compiled it again (%v)", len(before), len(after), after)
	}
}
