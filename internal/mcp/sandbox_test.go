package mcp

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sandbox"
)

// A stdio server under a sandbox reads what its grants allow and nothing
// else; the same server unconfined reads both files, so the refusal is the
// sandbox's.
func TestSandboxedServer(t *testing.T) {
	if sandbox.LandlockABI() == 0 {
		t.Skip("this kernel has no Landlock")
	}
	helper, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	allowed, denied := reachableDir(t), reachableDir(t)
	writeFile(t, filepath.Join(allowed, "note.txt"), "granted")
	writeFile(t, filepath.Join(denied, "secret.txt"), "not for the server")
	manifest := filepath.Join(reachableDir(t), "skill.toml")
	writeFile(t, manifest, `
[skill]
name = "mcp-test"
command = ["`+serverBin+`"]

[fs]
exec = ["`+serverBin+`"]
read = ["`+allowed+`"]
`)

	sandboxed := newEnv(t, &proc.Sandboxed{Helper: helper, Root: reachableDir(t)})
	for _, c := range []struct {
		name    string
		sandbox *Sandbox
	}{
		{"manifest", &Sandbox{Manifest: manifest}},
		{"grants", &Sandbox{FS: manifests.FSGrants{Exec: []string{serverBin}, Read: []string{allowed}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := stdio()
			cfg.Sandbox = c.sandbox
			s := sandboxed.connect(cfg)
			if got := call(t, s, "read_file", `{"path":"`+allowed+`/note.txt"}`); got != "granted" {
				t.Errorf("read the allowed file: %q", got)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			out, isErr, err := s.Call(ctx, "read_file", `{"path":"`+denied+`/secret.txt"}`)
			if err != nil || !isErr || !strings.Contains(out, "permission denied") {
				t.Errorf("read the denied file: %q, isError %v, err %v; want a tool error saying permission denied", out, isErr, err)
			}
		})
	}

	plain := newEnv(t, nil).connect(stdio())
	if got := call(t, plain, "read_file", `{"path":"`+denied+`/secret.txt"}`); got != "not for the server" {
		t.Errorf("the unconfined server read %q", got)
	}
}
