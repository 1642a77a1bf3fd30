package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/kairo-os/kairo/host/wasm"
)

// cachedModules are the modules compiled into the compilation cache under
// root, by name, with the inode of each: a module compiled again is a new
// file (wazero writes a temporary file and renames it over the old one).
func cachedModules(t *testing.T, root string) map[string]uint64 {
	t.Helper()
	entries, err := os.ReadDir(wasm.CacheFolder(root))
	if err != nil {
		t.Fatalf("the compilation cache: %v", err)
	}
	files := map[string]uint64{}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			files[e.Name()] = fi.Sys().(*syscall.Stat_t).Ino
		}
	}
	return files
}

// Two homes of one user share the user's compilation cache: the daemon of
// the second finds the drop-in plugin the first compiled, and compiles
// nothing.
func TestUserCacheShared(t *testing.T) {
	t.Parallel()
	xdg := t.TempDir()
	root := filepath.Join(xdg, "kairo", "wasm")
	var first map[string]uint64
	for i, home := range []string{t.TempDir(), t.TempDir()} {
		buildPlugin(t, filepath.Join(home, "plugins"), "echo")
		d := startUpEnv(t, home, kairoBin, append(childEnv(home), "XDG_CACHE_HOME="+xdg))
		if r := kairo(t, home, "plugins"); !regexp.MustCompile(`(?m)^echo\s.*running`).MatchString(r.stdout) {
			t.Fatalf("home %d: echo is not running:\n%s\n%s", i, r, d.stderr)
		}
		if code := d.stop(); code != 0 {
			t.Fatalf("home %d: kairo up exited %d:\n%s", i, code, d.stderr)
		}
		got := cachedModules(t, root)
		if i == 0 {
			if len(got) == 0 {
				t.Fatalf("the first home compiled nothing into %s:\n%s", root, d.stderr)
			}
			first = got
			continue
		}
		if len(got) != len(first) {
			t.Fatalf("the second home compiled again: the cache held %v, then %v", first, got)
		}
		for name, ino := range first {
			if got[name] != ino {
				t.Fatalf("the second home compiled %s again", name)
			}
		}
	}
}

// A compilation cache another user could write is refused, with the path,
// the mode and what to run; the daemon compiles in memory and serves. The
// control is the same cache made the user's own again: used.
func TestUserCacheRefused(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	buildPlugin(t, filepath.Join(home, "plugins"), "echo")
	root := filepath.Join(home, "cache", "kairo", "wasm") // ownCacheEnv's XDG_CACHE_HOME
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	d := startUpEnv(t, home, kairoBin, ownCacheEnv(home))
	if r := kairo(t, home, "plugins"); !regexp.MustCompile(`(?m)^echo\s.*running`).MatchString(r.stdout) {
		t.Fatalf("echo is not running beside a refused cache:\n%s\n%s", r, d.stderr)
	}
	for _, want := range []string{"compilation cache " + root + " refused", "mode drwxrwxrwx", "chmod 700 " + root, "plugins compile in memory"} {
		if !strings.Contains(d.stderr.String(), want) {
			t.Errorf("the daemon did not say %q:\n%s", want, d.stderr)
		}
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d:\n%s", code, d.stderr)
	}
	if _, err := os.Stat(wasm.CacheFolder(root)); err == nil {
		t.Fatal("the daemon compiled into the refused cache")
	}

	if err := os.Chmod(root, 0o700); err != nil {
		t.Fatal(err)
	}
	d = startUpEnv(t, home, kairoBin, ownCacheEnv(home))
	if r := kairo(t, home, "plugins"); !regexp.MustCompile(`(?m)^echo\s.*running`).MatchString(r.stdout) {
		t.Fatalf("echo is not running:\n%s\n%s", r, d.stderr)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d:\n%s", code, d.stderr)
	}
	if strings.Contains(d.stderr.String(), "compilation cache "+root+" refused") {
		t.Errorf("the user's own cache was refused:\n%s", d.stderr)
	}
	if len(cachedModules(t, root)) == 0 {
		t.Errorf("the daemon compiled nothing into the user's own cache:\n%s", d.stderr)
	}
}

// The status line while the plugins load says "compiling" unless the cache
// the host will use holds modules this wazero compiled.
func TestPluginsStatusCache(t *testing.T) {
	plugins := t.TempDir()
	if err := os.WriteFile(filepath.Join(plugins, "a.wasm"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	folders := []wasm.Folder{{Path: plugins}}
	root := filepath.Join(t.TempDir(), "kairo", "wasm")
	if got := pluginsStatus(folders, root); got != "kairo: compiling 1 plugin…" {
		t.Errorf("no cache: %q", got)
	}
	if err := os.MkdirAll(filepath.Join(root, "wazero-v0.0.1-old"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "wazero-v0.0.1-old", "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := pluginsStatus(folders, root); got != "kairo: compiling 1 plugin…" {
		t.Errorf("a cache of another wazero only: %q", got)
	}
	if err := os.MkdirAll(wasm.CacheFolder(root), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wasm.CacheFolder(root), "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := pluginsStatus(folders, root); got != "kairo: loading 1 plugin…" {
		t.Errorf("a filled cache: %q", got)
	}
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	if got := pluginsStatus(folders, root); got != "kairo: compiling 1 plugin…" {
		t.Errorf("a refused cache: %q", got)
	}
}
