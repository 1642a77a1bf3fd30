package wasm

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kairo-os/kairo/manifests"
)

// A module path that names a device or a FIFO is refused at once, before
// anything is read; a module over the cap is refused on its size. The
// control: a small regular file is read whole.
func TestReadModuleBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "p.wasm")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.wasm")
	f, _ := os.Create(big)
	f.Truncate(MaxModuleBytes + 1)
	f.Close()
	for path, want := range map[string]string{"/dev/zero": "not a regular file", fifo: "not a regular file", big: "over the module cap"} {
		done := make(chan error, 1)
		go func() { _, err := readModule(path); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("readModule(%s) = %v, want an error with %q", path, err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("readModule(%s) hangs", path)
		}
	}
	small := filepath.Join(dir, "small.wasm")
	os.WriteFile(small, []byte("\x00asm\x01\x00\x00\x00"), 0o644)
	if b, err := readModule(small); err != nil || len(b) != 8 {
		t.Fatalf("readModule(small) = %d bytes, %v", len(b), err)
	}
}

// A start with neither file changed takes the manifest its unit read last;
// a manifest written again is read again, and so is one that appears
// beside a module whose manifest was its custom section.
func TestReadFilesKeepsManifest(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.wasm")
	toml := filepath.Join(dir, "p.toml")
	manifest := func(kind string) {
		if err := os.WriteFile(toml, []byte("[plugin]\nname = \"p\"\nkinds = [\""+kind+"\"]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, withCustomSection(wasmHeader, ManifestSection, "[plugin]\nname = \"p\"\nkinds = [\"tool\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u := &unit{files: pluginFiles{wasm: path, stamp: stampOf(path)}}
	read := func(want string) *manifests.Plugin {
		t.Helper()
		man, wasm, err := u.readFiles()
		if err != nil {
			t.Fatal(err)
		}
		if len(wasm) == 0 || len(man.Plugin.Kinds) != 1 || man.Plugin.Kinds[0] != want {
			t.Fatalf("readFiles: kinds %q, want [%s]", man.Plugin.Kinds, want)
		}
		return man
	}
	first := read("tool")
	if read("tool") != first {
		t.Error("readFiles parsed the section's manifest again with the module unchanged")
	}
	manifest("policy")
	beside := read("policy")
	if read("policy") != beside {
		t.Error("readFiles parsed the manifest again with neither file changed")
	}
	manifest("input")
	read("input")
}
