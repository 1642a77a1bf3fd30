package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An MCP server of kairo.toml: the daemon starts it sandboxed, its tools
// join the agent's (kairo tools lists them, with the grants), and when the
// daemon stops the server goes with it — no process of it is left. A
// server that cannot start is reported, and the daemon serves on.
func TestMCPServers(t *testing.T) {
	home := t.TempDir()
	// The sandbox runs the server as a uid of its own: the way to it must
	// be passable.
	binDir := t.TempDir()
	for _, dir := range []string{filepath.Dir(binDir), binDir} {
		if err := os.Chmod(dir, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(binDir, "mcp-server")
	build := exec.Command(goTool(), "build", "-o", bin, "../../host/mcp/testdata/server")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // static: the grants name no libraries
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the MCP test server: %v\n%s", err, out)
	}
	toml := fmt.Sprintf(`
[mcp.test]
command = [%q]
[mcp.test.sandbox.fs]
exec = [%q]

[mcp.broken]
command = ["/nonexistent/mcp-server"]
`, bin, bin)
	if err := os.WriteFile(filepath.Join(home, "kairo.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startUp(t, home)

	deadline := time.Now().Add(20 * time.Second)
	var r result
	for {
		r = kairo(t, home, "tools")
		if strings.Contains(r.stdout, "mcp.test.echo") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kairo tools never listed the MCP server's tools:\n%s\n%s", r, d.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(r.stdout, "mcp.test.add") || !strings.Contains(r.stdout, bin) || !strings.Contains(r.stdout, "process.spawn") {
		t.Fatalf("kairo tools:\n%s", r)
	}
	if strings.Contains(r.stdout, "mcp.broken.") {
		t.Fatalf("the broken server lists tools:\n%s", r)
	}
	r = kairo(t, home, "events", "replay", "kairo.mcp.>")
	if !strings.Contains(r.stdout, "kairo.mcp.connected") || !strings.Contains(r.stdout, "kairo.mcp.failed") || !strings.Contains(r.stdout, "broken") {
		t.Fatalf("the servers' events:\n%s", r)
	}
	if n := processesOf(bin); n != 1 {
		t.Fatalf("%d processes run %s; want the one server", n, bin)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d:\n%s", code, d.stderr)
	}
	if n := processesOf(bin); n != 0 {
		t.Fatalf("%d processes of the MCP server outlived the daemon", n)
	}
}

// processesOf counts the processes whose program is path.
func processesOf(path string) int {
	n := 0
	dirs, _ := os.ReadDir("/proc")
	for _, e := range dirs {
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == path {
			n++
		}
	}
	return n
}
