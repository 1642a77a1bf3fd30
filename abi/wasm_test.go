package abi

import (
	"os"
	"os/exec"
	"testing"
)

// Plugins import abi, so it must keep building for wasip1: no cgo, no
// syscalls the target lacks, no dependency that does either.
func TestBuildsForWasip1(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package for GOOS=wasip1; skipped in -short mode")
	}
	// go test puts the toolchain's GOROOT/bin first in PATH.
	cmd := exec.Command("go", "build", "./abi/...")
	cmd.Dir = ".." // the module root; tests run in the package directory
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=wasip1 GOARCH=wasm go build ./abi/...: %v\n%s", err, out)
	}
}
