package wasm

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kairo-os/kairo/internal/testkit"

	"github.com/kairo-os/kairo/abi"
)

// cacheFiles are the modules compiled into the cache under root, by name,
// with the inode of each: a module compiled again is a new file (wazero
// writes a temporary file and renames it over the old one).
func cacheFiles(t *testing.T, root string) map[string]uint64 {
	t.Helper()
	entries, err := os.ReadDir(CacheFolder(root))
	if err != nil {
		t.Fatalf("the cache's folder for this wazero: %v", err)
	}
	files := map[string]uint64{}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = fi.Sys().(*syscall.Stat_t).Ino
	}
	return files
}

// logBuffer is a logger and what it wrote.
type logBuffer = testkit.SyncBuffer

// serveOnce loads wasm in h and has it handle a batch.
func serveOnce(t *testing.T, h *Engine, wasm []byte) {
	t.Helper()
	ctx := context.Background()
	p, err := h.Load(ctx, wasm, InstanceConfig{Name: "asm"})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	defer p.Close(ctx)
	if _, err := p.Init(ctx, abi.PluginConfig{}); err != nil {
		t.Fatalf("init: %v", err)
	}
	if _, err := p.Handle(ctx, testBatch(1, 8)); err != nil {
		t.Fatalf("handle: %v", err)
	}
}

// Two hosts on one cache, as two homes of one user: the second finds the
// module compiled by the first and compiles nothing.
func TestCacheShared(t *testing.T) {
	root := filepath.Join(t.TempDir(), "kairo", "wasm")
	wasm := asmGuest{version: 1}.bytes()
	start := func() *logBuffer {
		var log logBuffer
		h, err := NewEngine(EngineConfig{CacheDir: root, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close(context.Background())
		serveOnce(t, h, wasm)
		return &log
	}
	if log := start(); log.String() != "" {
		t.Fatalf("the first host warned:\n%s", log.String())
	}
	first := cacheFiles(t, root)
	if len(first) == 0 {
		t.Fatal("the first host compiled nothing into the cache")
	}
	for _, dir := range []string{filepath.Dir(root), root, CacheFolder(root)} {
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, %v; want 0700", dir, fi.Mode(), err)
		}
	}
	start()
	if second := cacheFiles(t, root); !mapsEqual(first, second) {
		t.Fatalf("the second host compiled again: the cache held %v, then %v", first, second)
	}
}

func mapsEqual(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// A cache another user could write is refused, saying which path, whose,
// what mode and what to run; the host compiles in memory and serves. The
// control is a cache of the user's own, mode 0700, which is used.
func TestCacheRefused(t *testing.T) {
	wasm := asmGuest{version: 1}.bytes()
	cases := []struct {
		name string
		// spoil makes the cache at root (made, empty, mode 0700) unsafe;
		// it returns the path the refusal must name.
		spoil func(t *testing.T, root string) string
		want  []string // in the refusal; none: the cache is used
	}{
		{"control: mode 0700, the user's own", func(t *testing.T, root string) string { return root }, nil},
		{"root writable by all", func(t *testing.T, root string) string {
			chmod(t, root, 0o777)
			return root
		}, []string{"is writable by its group and by others", "mode drwxrwxrwx", "chmod 700 "}},
		{"root writable by its group", func(t *testing.T, root string) string {
			chmod(t, root, 0o770)
			return root
		}, []string{"is writable by its group (mode drwxrwx---", "chmod 700 "}},
		{"a file in it writable by others", func(t *testing.T, root string) string {
			f := filepath.Join(root, "planted")
			write(t, f)
			chmod(t, f, 0o646)
			return f
		}, []string{"is writable by others", "chmod 600 ", "rm "}},
		{"a folder in it writable by all", func(t *testing.T, root string) string {
			d := filepath.Join(root, "wazero-old")
			if err := os.Mkdir(d, 0o700); err != nil {
				t.Fatal(err)
			}
			chmod(t, d, 0o777)
			return d
		}, []string{"is writable by its group and by others", "chmod 700 "}},
		{"a file in it owned by another user", func(t *testing.T, root string) string {
			if os.Geteuid() != 0 {
				t.Skip("giving a file to another user needs root")
			}
			f := filepath.Join(root, "planted")
			write(t, f)
			if err := os.Chown(f, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return f
		}, []string{"is owned by uid 65534", "rm "}},
		{"root owned by another user", func(t *testing.T, root string) string {
			if os.Geteuid() != 0 {
				t.Skip("giving a folder to another user needs root")
			}
			if err := os.Chown(root, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return root
		}, []string{"is owned by uid 65534", "rm -r "}},
		{"root a symbolic link", func(t *testing.T, root string) string {
			real := root + "-real"
			if err := os.Rename(root, real); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, root); err != nil {
				t.Fatal(err)
			}
			return root
		}, []string{"is a symbolic link", "[host] cache_dir"}},
		{"a symbolic link in it", func(t *testing.T, root string) string {
			l := filepath.Join(root, "planted")
			if err := os.Symlink("/etc/hostname", l); err != nil {
				t.Fatal(err)
			}
			return l
		}, []string{"is a symbolic link", "rm "}},
		{"a folder above it writable by all", func(t *testing.T, root string) string {
			chmod(t, filepath.Dir(root), 0o777)
			return filepath.Dir(root)
		}, []string{"the folder " + "%s" + " above it is writable by others", "chmod go-w "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "kairo", "wasm")
			if err := os.MkdirAll(root, 0o700); err != nil {
				t.Fatal(err)
			}
			chmod(t, filepath.Dir(root), 0o700)
			path := c.spoil(t, root)
			if c.want == nil {
				if err := CheckCache(root); err != nil {
					t.Fatalf("CheckCache refused the user's own cache: %v", err)
				}
			} else {
				err := CheckCache(root)
				if err == nil {
					t.Fatal("CheckCache accepted it")
				}
				for _, w := range append(c.want, path, "compilation cache "+root+" refused") {
					if w = strings.ReplaceAll(w, "%s", path); !strings.Contains(err.Error(), w) {
						t.Errorf("the refusal does not say %q:\n%v", w, err)
					}
				}
			}

			var log logBuffer
			h, err := NewEngine(EngineConfig{CacheDir: root, Logger: slog.New(slog.NewTextHandler(&log, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close(context.Background())
			for range 2 {
				serveOnce(t, h, wasm) // served either way
			}
			_, statErr := os.Stat(CacheFolder(root))
			if c.want == nil {
				if statErr != nil || log.String() != "" {
					t.Fatalf("the user's own cache was not used (%v):\n%s", statErr, log.String())
				}
				return
			}
			if statErr == nil {
				t.Errorf("the host compiled into a refused cache")
			}
			if n := strings.Count(log.String(), "refused"); n != 1 {
				t.Errorf("the host warned %d times, want once:\n%s", n, log.String())
			}
			if !strings.Contains(log.String(), "plugins compile in memory") {
				t.Errorf("the warning does not say the plugins compile in memory:\n%s", log.String())
			}
		})
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("not machine code"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A cache folder that cannot be made (here: a file where a folder should
// be) is not a refusal: the host compiles in memory and tries the disk
// again later.
func TestCacheUnwritable(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "kairo"))
	root := filepath.Join(dir, "kairo", "wasm")
	var log logBuffer
	h, err := NewEngine(EngineConfig{CacheDir: root, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	serveOnce(t, h, asmGuest{version: 1}.bytes())
	if !strings.Contains(log.String(), "could not be written") || !strings.Contains(log.String(), root) {
		t.Fatalf("the host did not say which cache could not be written:\n%s", log.String())
	}
	h.cmu.Lock()
	retry, refused := h.diskUntil, h.refused
	h.cmu.Unlock()
	if !retry.After(time.Now()) || refused {
		t.Fatalf("the host does not try the disk again later (until %v, refused %v)", retry, refused)
	}
}

// Daemons of one user share the cache, and wazero files each module it
// compiles as a temporary file renamed into place: a check that lists a
// temporary file another daemon then renames away passes, where it once
// failed, which sent the engine compiling in memory for a minute. The
// control: a file of another user's mode, written among the churn, is
// still refused.
func TestCheckCacheWhileAnotherWrites(t *testing.T) {
	root := t.TempDir()
	folder := CacheFolder(root)
	if err := os.MkdirAll(folder, 0o700); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // another engine's writes, as wazero's filecache.Add makes them
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tmp := filepath.Join(folder, "module."+strconv.Itoa(i)+".tmp")
			if err := os.WriteFile(tmp, []byte("code"), 0o600); err != nil {
				t.Error(err)
				return
			}
			if err := os.Rename(tmp, filepath.Join(folder, "module")); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 500 {
		if err := CheckCache(root); err != nil {
			close(stop)
			<-done
			t.Fatalf("a cache another engine writes was refused: %v", err)
		}
	}
	if err := os.WriteFile(filepath.Join(folder, "planted"), []byte("code"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(folder, "planted"), 0o666); err != nil {
		t.Fatal(err)
	}
	err := CheckCache(root)
	close(stop)
	<-done
	var refused *CacheError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "planted") {
		t.Fatalf("a file others can write, among another engine's writes: %v, want it refused", err)
	}
}
