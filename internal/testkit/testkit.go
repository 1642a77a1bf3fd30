// Package testkit is what the tests that run the kairo binary share: the
// binary built once, the environment of a kairo child, and a buffer a
// child's output is collected in while the test reads it.
package testkit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
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
//
// The binary is linked once for all the test binaries of a `go test
// ./...` (kairo alone was linked by four packages): go build writes it
// into a folder of the user's cache (see linkCached), and finds it there
// up to date by its build ID — which hashes every input: the
// sources, the Go version, the flags — when nothing changed. The caller
// gets a hard link of it in a new folder of its own, so that a later
// build, which replaces the cached file by a new one, never changes a
// binary a test runs.
func Build(pkg, name string, ldflags ...string) (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", name+"-bin-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	os.Chmod(dir, 0o755)
	bin = filepath.Join(dir, name)
	if err := buildInto(bin, pkg, name, ldflags); err != nil {
		remove()
		return "", nil, err
	}
	return bin, remove, nil
}

// BuildKairoWithHelper is BuildKairo with kairo-sandbox beside kairo, as
// `make build` lays them out: kairo up then starts the small helper for
// each sandboxed spawn rather than kairo itself, whose start runs the
// init of every package kairo links (a quarter of a CLI process's CPU,
// and most of a helper's). A test of kairo without the helper beside it
// runs a copy of kairo in a folder of its own (cmd/kairo's binCopy).
func BuildKairoWithHelper() (bin string, remove func(), err error) {
	bin, remove, err = BuildKairo()
	if err != nil {
		return "", nil, err
	}
	helper := filepath.Join(filepath.Dir(bin), "kairo-sandbox")
	if err := buildInto(helper, "./cmd/kairo-sandbox", "kairo-sandbox", nil); err != nil {
		remove()
		return "", nil, err
	}
	return bin, remove, nil
}

// buildInto builds pkg into the path bin, as Build does.
func buildInto(bin, pkg, name string, ldflags []string) error {
	args := []string{"build", "-ldflags=" + strings.Join(append([]string{"-s", "-w"}, ldflags...), " ")}
	return linkCached(bin, pkg, name, args)
}

// linkCached builds pkg with go args into the cache folder of
// os.UserCacheDir (kairo/testbin) and hard-links the result to bin; with
// no cache folder to write, it builds into bin. The cached file is named
// by name and a hash of pkg and args: a handful of files, each replaced
// when its inputs change, whatever the clone or the commit. A lock file
// beside it holds other processes off while one builds and links: two
// packages of the same run ask at once.
func linkCached(bin, pkg, name string, args []string) error {
	cache, err := os.UserCacheDir()
	if err == nil {
		cache = filepath.Join(cache, "kairo", "testbin")
		err = os.MkdirAll(cache, 0o700)
	}
	if err != nil {
		return goBuild(bin, pkg, name, args)
	}
	sum := sha256.Sum256([]byte(pkg + "\x00" + strings.Join(args, "\x00")))
	cached := filepath.Join(cache, name+"-"+hex.EncodeToString(sum[:6]))
	lock, err := os.OpenFile(cached+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("build %s: lock its cached binary: %w", name, err)
	}
	defer lock.Close() // and with it the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("build %s: lock %s: %w", name, lock.Name(), err)
	}
	if err := goBuild(cached, pkg, name, args); err != nil {
		return err
	}
	if os.Link(cached, bin) == nil {
		return nil
	}
	// Another file system (a tmpfs /tmp): a copy.
	if err := copyFile(bin, cached); err != nil {
		return fmt.Errorf("build %s: copy the cached binary %s to %s: %w", name, cached, bin, err)
	}
	return nil
}

// copyFile copies the executable src to the new file dst.
func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// goBuild runs go args -o out pkg at the module's root, static.
func goBuild(out, pkg, name string, args []string) error {
	build := exec.Command("go", append(args, "-o", out, pkg)...)
	build.Dir = root()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %v\n%s", name, err, out)
	}
	return nil
}

// LazyKairo is kairo (BuildKairo) built on the first Path, once, for a
// package whose tests need it only now and then; its TestMain calls
// Remove after the tests ran.
type LazyKairo struct {
	once   sync.Once
	path   string
	remove func()
	err    error
}

// Path builds kairo on the first call and returns its path; it fails tb
// when the build failed.
func (k *LazyKairo) Path(tb testing.TB) string {
	tb.Helper()
	k.once.Do(func() { k.path, k.remove, k.err = BuildKairo() })
	if k.err != nil {
		tb.Fatal(k.err)
	}
	return k.path
}

// Remove removes the binary Path built, if it did.
func (k *LazyKairo) Remove() {
	if k.remove != nil {
		k.remove()
	}
}

// Main is a TestMain for tests that run kairo: it builds the binary
// (BuildKairo) into *bin, runs the tests and removes it.
func Main(m *testing.M, bin *string) { MainWith(m, bin, MainConfig{}) }

// MainConfig is how MainWith lays out what the tests run. The zero value
// is Main's: kairo alone, and each home compiling its plugins into a cache
// of its own.
type MainConfig struct {
	// Helper puts kairo-sandbox beside kairo (BuildKairoWithHelper).
	Helper bool
	// SharedCache makes ChildEnv point every home at one compilation
	// cache, made for this test binary and removed after its tests ran:
	// a drop-in plugin one test's daemon compiled, the next one's finds
	// there, as the homes of one user share the user's cache. wazero
	// writes each compiled module to a temporary file it renames into
	// place, so daemons that share the cache never read half a module.
	// A test about the cache sets XDG_CACHE_HOME after ChildEnv's.
	SharedCache bool
}

// MainWith is Main laid out as c says.
func MainWith(m *testing.M, bin *string, c MainConfig) {
	build := BuildKairo
	if c.Helper {
		build = BuildKairoWithHelper
	}
	b, remove, err := build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*bin = b
	if c.SharedCache {
		if sharedCache, err = os.MkdirTemp("", "kairo-test-cache-"); err != nil {
			remove()
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	remove()
	if sharedCache != "" {
		os.RemoveAll(sharedCache)
	}
	os.Exit(code)
}

// sharedCache is the XDG_CACHE_HOME of every home ChildEnv makes the
// environment of, when MainWith was asked for one; "" otherwise.
var sharedCache string

// ChildEnv is the environment of a kairo child: ours without KAIRO_*, with
// KAIRO_HOME set to home, and XDG_RUNTIME_DIR a folder that does not
// exist, so that a daemon of the tests names its home in no pointer file:
// not the user's, not one another test's client reads. XDG_CACHE_HOME is
// the home's folder "cache": each home compiles its plugins into a
// compilation cache of its own, never the user's; or, under MainWith's
// SharedCache, the test binary's one cache.
func ChildEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KAIRO_") && !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") && !strings.HasPrefix(kv, "XDG_CACHE_HOME=") {
			env = append(env, kv)
		}
	}
	cache := filepath.Join(home, "cache")
	if sharedCache != "" {
		cache = sharedCache
	}
	return append(env, "KAIRO_HOME="+home, "XDG_RUNTIME_DIR="+filepath.Join(home, "no-runtime-dir"), "XDG_CACHE_HOME="+cache)
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
