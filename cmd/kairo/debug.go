package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kairo-os/kairo/abi"
)

func runDebug(ctx context.Context, args []string) error {
	sub := []command{
		{"heap", "write the daemon's heap profile, for go tool pprof", runDebugHeap},
	}
	if len(args) == 0 {
		return &usageError{msg: "kairo debug needs a command: heap", synopsis: "kairo debug heap [--gc] [-o FILE]"}
	}
	return dispatch(ctx, sub, "kairo debug", args)
}

func runDebugHeap(ctx context.Context, args []string) error {
	f := newFlags("debug heap", "kairo debug heap [--gc] [-o FILE]", `
Write the running daemon's heap profile (debug.heap, the operator's alone)
to FILE, by default heap-YYYYmmdd-HHMMSS.pb.gz in the current folder, and
print how to read it. The heap in use it prints is the figure kairo status
shows, taken with the profile.`)
	gc := f.Bool("gc", false, "collect garbage first, so the profile shows the live heap")
	out := f.String("o", "", "write the profile to `FILE`")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	var res abi.DebugHeapResult
	if err := callKernel(ctx, "kairo debug heap", abi.MethodDebugHeap, abi.DebugHeapParams{GC: *gc}, &res); err != nil {
		return err
	}
	path := *out
	if path == "" {
		path = "heap-" + res.Time.Local().Format("20060102-150405") + ".pb.gz"
	}
	if err := os.WriteFile(path, res.Profile, 0o600); err != nil {
		return fmt.Errorf("kairo debug heap: %w", err)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	fmt.Printf("heap profile of %s (heap in use %s) written to %s\nread it with: go tool pprof -top %s\n",
		res.Time.Local().Format(time.DateTime), humanBytes(res.HeapBytes), path, path)
	return nil
}
