package client_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goTool is the go command, or a skip when the test runs without one.
func goTool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to inspect the build with: %v", err)
	}
	return path
}

// nonStandard lists the packages outside the standard library that pkgs
// and what they import pull in.
func nonStandard(t *testing.T, pkgs ...string) []string {
	t.Helper()
	args := append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, pkgs...)
	out, err := exec.Command(goTool(t), args...).Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	return strings.Fields(string(out))
}

// A program that dials Kairo links abi (and the msgpack it encodes with)
// and the standard library: not the kernel, its store, the sandbox or the
// plugin runtime.
func TestDependencies(t *testing.T) {
	t.Parallel()
	allowed := map[string]bool{"github.com/kairo-os/kairo/sdk/client": true}
	for _, p := range nonStandard(t, "github.com/kairo-os/kairo/abi") {
		if p != "github.com/kairo-os/kairo/abi" && strings.HasPrefix(p, "github.com/kairo-os/kairo/") {
			t.Errorf("abi imports %s; it may import nothing of Kairo's but itself", p)
		}
		allowed[p] = true
	}
	var extra []string
	for _, p := range nonStandard(t, ".") {
		if !allowed[p] {
			extra = append(extra, p)
		}
	}
	if len(extra) > 0 {
		t.Errorf("sdk/client imports, beyond abi, its msgpack and the standard library:\n\t%s\nmove what the client needs into abi, or out of the client", strings.Join(extra, "\n\t"))
	}
}

// The smallest client — dial, publish one event — builds to under 5 MB
// stripped, and works: it publishes to a real kernel.
func TestClientBinarySize(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a program")
	}
	bin := filepath.Join(t.TempDir(), "publish")
	build := exec.Command(goTool(t), "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./testdata/publish")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 5_000_000
	t.Logf("stripped size of a client that publishes one event: %d bytes (%.2f MB; limit %d)", fi.Size(), float64(fi.Size())/1e6, limit)
	if fi.Size() >= limit {
		t.Errorf("the client program is %d bytes stripped, want under %d: what does sdk/client link (go list -deps)?", fi.Size(), limit)
	}

	sock, stop := startKernel()
	defer stop()
	run := exec.Command(bin)
	run.Env = append(os.Environ(), "KAIRO_SOCKET="+sock)
	out, err := run.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "stored at seq 1" {
		t.Fatalf("the client program: %v\n%s", err, out)
	}
}
