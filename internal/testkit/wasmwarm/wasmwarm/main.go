// Command wasmwarm compiles plugin modules into a compilation cache
// (package wasmwarm) in a process of its own: a test built with -race would
// run wazero's compiler through the race detector.
//
//	wasmwarm CACHEDIR trusted:PATH|metered:PATH...
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/kairo-os/kairo/host/wasm"
	"github.com/kairo-os/kairo/internal/testkit/wasmwarm"
)

func main() {
	if err := warm(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "wasmwarm:", err)
		os.Exit(1)
	}
}

// warm is wasmwarm.Warm in this process: args are the cache
// folder, then each module as "trusted:PATH" or "metered:PATH". The
// modules compile at once, as many as there are processors.
func warm(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("usage: wasmwarm CACHEDIR, then each module as trusted:PATH or metered:PATH")
	}
	var mods []wasmwarm.Module
	for _, a := range args[1:] {
		kind, path, ok := strings.Cut(a, ":")
		if !ok || (kind != "trusted" && kind != "metered") {
			return fmt.Errorf("%q: want trusted:PATH or metered:PATH", a)
		}
		mods = append(mods, wasmwarm.Module{Path: path, Trusted: kind == "trusted"})
	}
	ctx := context.Background()
	e, err := wasm.NewEngine(wasm.EngineConfig{CacheDir: args[0]})
	if err != nil {
		return err
	}
	defer e.Close(ctx)
	errs := make(chan error, len(mods))
	for _, m := range mods {
		go func() {
			b, err := os.ReadFile(m.Path)
			if err != nil {
				errs <- err
				return
			}
			mod, err := e.Prepare(ctx, b, wasm.InstanceConfig{Name: m.Path, Trusted: m.Trusted})
			if err != nil {
				errs <- fmt.Errorf("%s: %w", m.Path, err)
				return
			}
			mod.Release()
			errs <- nil
		}()
	}
	var first error
	for range mods {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}
