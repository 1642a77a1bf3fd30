// Package wasmbuild builds this module's Go plugins for its tests, as
// `make plugins` does: each main package a WASI reactor compiled by the
// standard Go toolchain (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared).
package wasmbuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// root is the module's root folder, found from this file's place in it.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Build compiles the main package at pkg, a path from the module root such
// as "./plugins/echo", to the module out.
func Build(pkg, out string) error {
	// go test puts the toolchain's GOROOT/bin first in PATH. Neither the
	// clone's path nor its commit goes into the module: the same source
	// gives the same bytes, which wazero's compilation cache is keyed by,
	// so a test's plugin compiled once is found again by the next commit's
	// and another clone's tests.
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-buildmode=c-shared", "-o", out, pkg)
	cmd.Dir = root()
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s (GOOS=wasip1 GOARCH=wasm go build -trimpath -buildvcs=false -buildmode=c-shared %s): %v\n%s", pkg, pkg, err, msg)
	}
	return nil
}

// Plugin builds the built-in plugin plugins/NAME into dir as NAME.wasm, with
// its manifest NAME.toml beside it, as a plugin folder holds it.
func Plugin(name, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// A built-in plugin is a package, built as a module from its wasm
	// folder; echo is a main package itself.
	pkg := "./plugins/" + name
	if fi, err := os.Stat(filepath.Join(root(), "plugins", name, "wasm")); err == nil && fi.IsDir() {
		pkg += "/wasm"
	}
	if err := Build(pkg, filepath.Join(dir, name+".wasm")); err != nil {
		return err
	}
	manifest, err := os.ReadFile(filepath.Join(root(), "plugins", name, name+".toml"))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".toml"), manifest, 0o600)
}
