package mcp

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// npmServer is the reference filesystem server, installed from npm by
// `npm ci --prefix internal/mcp/testdata/npm` (CI runs it).
const npmServer = "testdata/npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"

// A real published server, run from its package: it lists its tools, reads
// a file in the folder it was given, and refuses one outside it.
func TestPublishedFilesystemServer(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: apt-get install -y nodejs npm, then npm ci --prefix internal/mcp/testdata/npm")
	}
	script, err := filepath.Abs(npmServer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("the filesystem MCP server is not installed (%v): run npm ci --prefix internal/mcp/testdata/npm from the repository's root", err)
	}
	allowed, outside := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(allowed, "hello.txt"), "hello from the allowed folder\n")
	writeFile(t, filepath.Join(outside, "secret.txt"), "not for the server\n")

	e := newEnv(t, nil)
	s := e.connect(ServerConfig{Name: "filesystem", Command: []string{node, script, allowed}, ShutdownGrace: time.Second})
	names := toolNames(s.Tools())
	for _, want := range []string{"read_text_file", "list_directory", "write_file", "list_allowed_directories"} {
		if _, ok := tool(s.Tools(), want); !ok {
			t.Errorf("tools = %v, want %s among them", names, want)
		}
	}
	read, _ := tool(s.Tools(), "read_text_file")
	props, _ := read.Parameters["properties"].(map[string]any)
	if path, _ := props["path"].(map[string]any); path["type"] != "string" {
		t.Errorf("read_text_file parameters = %v, want a string path", read.Parameters)
	}

	if got := call(t, s, "read_text_file", `{"path":"`+filepath.Join(allowed, "hello.txt")+`"}`); got != "hello from the allowed folder\n" {
		t.Errorf("read the allowed file: %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, isErr, err := s.Call(ctx, "read_text_file", `{"path":"`+filepath.Join(outside, "secret.txt")+`"}`)
	if err != nil || !isErr || !strings.Contains(out, "Access denied") || strings.Contains(out, "not for the server") {
		t.Errorf("read outside the allowed folder: %q, isError %v, err %v; want a tool error saying access denied", out, isErr, err)
	}

	p := process(s)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if info := p.Info(); alive(info.PID) || info.Signal == "SIGKILL" {
		t.Errorf("after Close the server %d is %s (signal %q); want it ended by the close of its stdin or SIGTERM", info.PID, info.Status, info.Signal)
	}
}
