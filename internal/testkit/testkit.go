// Package testkit is what the tests that run the kairo binary share: the
// binary built once, the environment of a kairo child, and a buffer a
// child's output is collected in while the test reads it.
package testkit

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// root is the module's root folder, found from this file's place in it.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// BuildKairo builds cmd/kairo into a new folder others may pass (sandboxed
// skills run as uids of their own and may exec kairo itself) and returns
// the binary's path and a function that removes the folder. It builds
// static, as `make build` does: a cgo kairo's sandbox helper makes its
// threads with pthread_create, whose 8 MiB stacks a skill's memory limit
// can refuse on a loaded machine ("runtime/cgo: pthread_create failed").
// It links as `make build` does too, without the symbol table and DWARF
// (-s -w), so that what a test measures of the binary (its size, the
// pages of it a daemon maps) is the binary that ships. Panics still name
// functions, files and lines: that is the pcln table, which stays.
func BuildKairo() (bin string, remove func(), err error) {
	return Build("./cmd/kairo", "kairo")
}

// Build builds the command pkg (a path from the module's root, such as
// "./cmd/kairo") as BuildKairo builds kairo, into a binary named name —
// without the race detector whatever the test that asks was built with.
// ldflags are linker flags added to the build's.
func Build(pkg, name string, ldflags ...string) (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", name+"-bin-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	os.Chmod(dir, 0o755)
	bin = filepath.Join(dir, name)
	build := exec.Command("go", "build", "-ldflags="+strings.Join(append([]string{"-s", "-w"}, ldflags...), " "), "-o", bin, pkg)
	build.Dir = root()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		remove()
		return "", nil, fmt.Errorf("build %s: %v\n%s", name, err, out)
	}
	return bin, remove, nil
}

// Main is a TestMain for tests that run kairo: it builds the binary
// (BuildKairo) into *bin, runs the tests and removes it.
func Main(m *testing.M, bin *string) {
	b, remove, err := BuildKairo()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*bin = b
	code := m.Run()
	remove()
	os.Exit(code)
}

// ChildEnv is the environment of a kairo child: ours without KAIRO_*, with
// KAIRO_HOME set to home, and XDG_RUNTIME_DIR a folder that does not
// exist, so that a daemon of the tests names its home in no pointer file:
// not the user's, not one another test's client reads. XDG_CACHE_HOME is
// the home's folder "cache": each home compiles its plugins into a
// compilation cache of its own, never the user's.
func ChildEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KAIRO_") && !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") && !strings.HasPrefix(kv, "XDG_CACHE_HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "KAIRO_HOME="+home, "XDG_RUNTIME_DIR="+filepath.Join(home, "no-runtime-dir"), "XDG_CACHE_HOME="+filepath.Join(home, "cache"))
}

// SyncBuffer collects what a child or a logger writes while the test reads
// it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
