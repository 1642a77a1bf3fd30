package client_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The README's embedding example builds as written, with the imports it
// needs: its calls are the client's typed ones. The control: the same
// block with a call the client does not have fails to build.
func TestREADMEEmbedding(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a program")
	}
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(b), "```go\n")
	if ok {
		block, _, ok = strings.Cut(block, "```")
	}
	if !ok || !strings.Contains(block, "func main()") {
		t.Fatal("the README has no ```go block with a main")
	}
	var lines []string
	for l := range strings.SplitSeq(block, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "  ")) // the block is indented in its list item
	}
	src := `package main

import (
	"context"
	"fmt"
	"log"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sandbox"
)

` + strings.Join(lines, "\n")
	build := func(t *testing.T, src string) ([]byte, error) {
		// An overlay puts the program in the module, without writing there.
		dir := t.TempDir()
		root, err := filepath.Abs("../..")
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, "main.go")
		if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(root, "internal", "readmeembed", "main.go"): file}})
		if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(goTool(t), "build", "-o", os.DevNull, "-overlay", filepath.Join(dir, "overlay.json"), "./internal/readmeembed")
		cmd.Dir = root
		// Static, as make build builds kairo and testkit the tests' kairo:
		// the packages it imports are then those already compiled for
		// them, not compiled again with cgo (and linked by gcc) for this
		// one program. The example's Go is the same either way.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		return cmd.CombinedOutput()
	}
	if out, err := build(t, src); err != nil {
		t.Fatalf("the README's embedding example does not build: %v\n%s\n%s", err, out, src)
	}
	if out, err := build(t, strings.Replace(src, "p.Wait(ctx)", "p.WaitFor(ctx)", 1)); err == nil || !strings.Contains(string(out), "WaitFor") {
		t.Errorf("control: a call the client lacks built: %v\n%s", err, out)
	}
}
