package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDebugHeap: kairo debug heap writes the daemon's heap profile where
// it is told, and go tool pprof reads it. The denial: a skill granted
// debug.heap in its [ipc] is still refused, as the heap is the operator's
// to read; its control is the operator's own call above.
func TestDebugHeap(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	startUp(t, home)
	out := filepath.Join(t.TempDir(), "heap.pb.gz")
	r := kairo(t, home, "debug", "heap", "--gc", "-o", out)
	if r.code != 0 || !strings.Contains(r.stdout, "go tool pprof -top "+out) {
		t.Fatalf("kairo debug heap: %s", r)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("the profile is not gzipped: %v", err)
	}
	proto, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil || len(proto) == 0 {
		t.Fatalf("the profile does not unzip: %d bytes, %v", len(proto), err)
	}
	top, err := exec.Command(goTool(), "tool", "pprof", "-top", out).CombinedOutput()
	if err != nil || !strings.Contains(string(top), "inuse_space") {
		t.Fatalf("go tool pprof -top %s: %v\n%s", out, err, top)
	}

	// Without -o: a dated file in the current folder.
	dir := t.TempDir()
	r = kairoRun(t, dir, childEnv(home), nil, "debug", "heap")
	files, _ := filepath.Glob(filepath.Join(dir, "heap-*.pb.gz"))
	if r.code != 0 || len(files) != 1 {
		t.Fatalf("kairo debug heap in %s made %v: %s", dir, files, r)
	}

	skill := skillFolder(t, "kairo-heap-")
	manifest := filepath.Join(skill, "skill.toml")
	text := `[skill]
name = "heap-reader"
command = ["/usr/bin/sh", "-c", '''` + kairoBin + ` debug heap -o /tmp/heap.pb.gz 2>&1; exit 0''']

[fs]
read = ["/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache", "` + filepath.Dir(kairoBin) + `"]
exec = ["/usr/bin", "` + kairoBin + `"]

[ipc]
call = ["debug.heap"]
`
	if err := os.WriteFile(manifest, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	r = kairo(t, home, "run", manifest)
	if r.code != 0 || !strings.Contains(r.stdout, "permission denied: debug.heap is the operator's alone; skill heap-reader") {
		t.Fatalf("the skill should be refused the heap: %s", r)
	}
}
