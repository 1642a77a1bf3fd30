package wasm

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kairo-os/kairo/internal/testkit/wasmwarm"
	"github.com/kairo-os/kairo/internal/wasmbuild"
)

// The guests the tests load: real modules, built from Go sources once per
// test binary by the standard toolchain (its build cache keeps a rebuild
// to well under a second).
var guestSources = map[string]string{
	"asker":       "./host/wasm/testdata/asker",
	"echo":        "./plugins/echo",
	"hostile":     "./host/wasm/testdata/hostile",
	"meter_sleep": "./host/wasm/testdata/meter_sleep",
}

var (
	guestDir string
	guests   = map[string][]byte{}
	// testEngine is shared, so every guest is compiled once per test binary.
	testEngine *Engine
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	guestDir, err = os.MkdirTemp("", "kairo-host-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(guestDir)
	if err := buildGuests(guestDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	testEngine, err = NewEngine(EngineConfig{
		CacheDir: filepath.Join(guestDir, "cache"),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer testEngine.Close(context.Background())
	if err := warmCache(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// warmCache fills the test engine's compilation cache with what Load
// compiles (the metered rewrite of an untrusted guest, the trusted one as
// it is), in a process built without the race detector
// (internal/testkit/wasmwarm): wazero's compiler under -race took most of
// this package's time.
func warmCache() error {
	var mods []wasmwarm.Module
	for _, j := range []struct {
		guest   string
		trusted bool
	}{{"echo", false}, {"hostile", false}, {"echo", true}, {"meter_sleep", false}, {"asker", false}, {"asker", true}} {
		mods = append(mods, wasmwarm.Module{Path: filepath.Join(guestDir, j.guest+".wasm"), Trusted: j.trusted})
	}
	if err := wasmwarm.Warm(filepath.Join(guestDir, "cache"), mods...); err != nil {
		return fmt.Errorf("compile guests: %w", err)
	}
	return nil
}

// buildGuests builds every guest into dir, two at a time.
func buildGuests(dir string) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, 2)
	)
	for name, src := range guestSources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out := filepath.Join(dir, name+".wasm")
			err := wasmbuild.Build(src, out)
			var bin []byte
			if err == nil {
				bin, err = os.ReadFile(out)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("guest %s: %w", name, err))
				return
			}
			guests[name] = bin
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%v", errs)
	}
	return nil
}

// load loads a guest and closes it when the test ends.
func load(tb testing.TB, name string, opts InstanceConfig) *Plugin {
	tb.Helper()
	return loadBytes(tb, name, guests[name], opts)
}

func loadBytes(tb testing.TB, name string, wasm []byte, opts InstanceConfig) *Plugin {
	tb.Helper()
	if opts.Name == "" {
		opts.Name = name
	}
	p, err := testEngine.Load(context.Background(), wasm, opts)
	if err != nil {
		tb.Fatalf("load %s: %v", name, err)
	}
	tb.Cleanup(func() { p.Close(context.Background()) })
	return p
}
