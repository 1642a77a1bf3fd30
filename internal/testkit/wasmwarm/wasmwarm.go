// Package wasmwarm fills a plugin engine's compilation cache for tests, in
// a process of its own (cmd wasmwarm, built here without the race
// detector): wazero's compiler run under -race takes 20-30 s of CPU for one
// Go plugin, and each package's tests compiled the plugins they load so.
// The cache holds what the engine would compile itself (the metered rewrite
// of an untrusted module, the compacted trusted one), keyed by the bytes
// compiled: a module the cache lacks is compiled by the test as before.
package wasmwarm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/kairo-os/kairo/internal/testkit"
)

// Module is a module file and how the tests' engine runs it: Trusted as
// a built-in plugin or one whose manifest trusts it, else metered.
type Module struct {
	Path    string
	Trusted bool
}

// arg is m as cmd wasmwarm reads it: "trusted:PATH" or "metered:PATH".
func (m Module) arg() string {
	if m.Trusted {
		return "trusted:" + m.Path
	}
	return "metered:" + m.Path
}

// Warm compiles mods into the compilation cache at cacheDir, the folder a
// test's engine is given as wasm.EngineConfig.CacheDir, in a process
// built without the race detector.
//
// wazero files its cache under the version of itself it finds in the
// binary's build information, and a test binary's has none ("dev"): the
// warmer is linked with the version this binary sees, and Warm fails when
// the cache this binary reads is still empty after it, rather than leave
// the tests compiling under -race unseen.
func Warm(cacheDir string, mods ...Module) error {
	v := wazeroVersion()
	bin, remove, err := testkit.Build("./internal/testkit/wasmwarm/wasmwarm", "wasmwarm",
		"-X", "github.com/tetratelabs/wazero/internal/version.version="+v)
	if err != nil {
		return err
	}
	defer remove()
	args := []string{cacheDir}
	for _, m := range mods {
		args = append(args, m.arg())
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("wasmwarm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	filed := filepath.Join(cacheDir, "wazero-"+v+"-"+runtime.GOARCH+"-"+runtime.GOOS)
	if ents, err := os.ReadDir(filed); err != nil || len(ents) == 0 {
		return fmt.Errorf("wasmwarm compiled %d modules but %s, where this binary's wazero looks, holds none (%v): the warmer's wazero version is not this binary's", len(mods), filed, err)
	}
	return nil
}

// wazeroVersion is the version wazero finds of itself in this binary, as
// its internal/version does: the dependency's, else "dev".
func wazeroVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if strings.Contains(dep.Path, "github.com/tetratelabs/wazero") && dep.Version != "" && dep.Version != "(devel)" {
				return dep.Version
			}
		}
	}
	return "dev"
}
