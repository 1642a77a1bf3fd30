package mcp

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/kairo-os/kairo/manifests"
)

// The config reads from [mcp.NAME] tables of kairo.toml.
func TestConfigFromTOML(t *testing.T) {
	var doc struct {
		MCP map[string]ServerConfig `toml:"mcp"`
	}
	_, err := toml.Decode(`
[mcp.files]
command = ["/usr/bin/node", "/opt/mcp/filesystem/index.js", "/srv/docs"]
env = { NODE_OPTIONS = "--max-old-space-size=256" }
shutdown_grace = "5s"

[mcp.files.sandbox]
fs.read = ["/usr", "/opt/mcp", "/srv/docs"]
fs.exec = ["/usr/bin/node"]
limits.memory = "512MiB"

[mcp.web]
url = "http://127.0.0.1:8931/mcp"
connect_timeout = "10s"
`, &doc)
	if err != nil {
		t.Fatal(err)
	}
	files := doc.MCP["files"]
	files.Name = "files"
	if err := files.check(); err != nil {
		t.Fatal(err)
	}
	if files.ShutdownGrace != 5*time.Second || files.ConnectTimeout != DefaultConnectTimeout {
		t.Errorf("durations: grace %s, connect timeout %s", files.ShutdownGrace, files.ConnectTimeout)
	}
	if files.Env["NODE_OPTIONS"] != "--max-old-space-size=256" || len(files.Command) != 3 {
		t.Errorf("command %q, env %v", files.Command, files.Env)
	}
	sb := files.Sandbox
	if sb == nil || !slices.Equal(sb.FS.Exec, []string{"/usr/bin/node"}) || sb.Limits.Memory != 512*manifests.MiB {
		t.Errorf("sandbox = %+v", sb)
	}
	web := doc.MCP["web"]
	web.Name = "web"
	if err := web.check(); err != nil || web.ConnectTimeout != 10*time.Second || web.ShutdownGrace != DefaultShutdownGrace {
		t.Errorf("web: %v, %+v", err, web)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  ServerConfig
		want string
	}{
		{ServerConfig{Command: []string{"x"}}, "name is empty"},
		{ServerConfig{Name: "a"}, "command is empty"},
		{ServerConfig{Name: "a", Command: []string{"x"}, URL: "http://h/mcp"}, "not both"},
		{ServerConfig{Name: "a", URL: "ftp://h/mcp"}, `url "ftp://h/mcp" is not an http or https URL`},
		{ServerConfig{Name: "a", URL: "http://h/mcp", Sandbox: &Sandbox{}}, "sandbox applies to a stdio server"},
		{ServerConfig{Name: "a", URL: "http://h/mcp", Cwd: "/tmp"}, "env and cwd apply to a stdio server"},
		{ServerConfig{Name: "a", Command: []string{"x"}, Sandbox: &Sandbox{Manifest: "skill.toml"}}, "give the skill.toml as an absolute path"},
		{ServerConfig{Name: "a", Command: []string{"x"}, Sandbox: &Sandbox{Manifest: "/s.toml", FS: manifests.FSGrants{Read: []string{"/"}}}}, "give manifest or grants"},
		{ServerConfig{Name: "a", Command: []string{"x"}, Cwd: "work"}, `cwd "work": give an absolute path`},
		{ServerConfig{Name: "a", Command: []string{"x"}, ShutdownGrace: -time.Second}, "shutdown_grace -1s is negative"},
	} {
		err := c.cfg.check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one saying %q", c.cfg, err, c.want)
		}
	}
}

// Grants written in kairo.toml are checked as a skill manifest's are, and
// the errors name the keys of [mcp.NAME].
func TestConfigSandboxErrors(t *testing.T) {
	dir := t.TempDir()
	pty := filepath.Join(dir, "pty.toml")
	writeFile(t, pty, "[skill]\nname = \"x\"\ncommand = [\"/bin/cat\"]\n[fs]\nexec = [\"/bin/cat\"]\n[sandbox]\npty = true\n")
	limited := filepath.Join(dir, "limited.toml")
	writeFile(t, limited, "[skill]\nname = \"x\"\ncommand = [\"/bin/cat\"]\n[fs]\nexec = [\"/bin/cat\"]\n[limits]\noutput_bytes = \"1MiB\"\n")
	for _, c := range []struct {
		sandbox Sandbox
		want    []string
	}{
		{Sandbox{FS: manifests.FSGrants{Read: []string{"/usr"}}}, []string{`[mcp.s] command[0]: "/bin/cat" is not in fs.exec`}},
		{Sandbox{FS: manifests.FSGrants{Exec: []string{"/bin/cat"}, Read: []string{"usr"}}}, []string{`[mcp.s] sandbox.fs.read[0]: "usr" is relative`}},
		{Sandbox{FS: manifests.FSGrants{Exec: []string{"/bin/cat"}, Read: []string{"$SKILL_DIR/data"}}}, []string{"$SKILL_DIR means the folder of a skill.toml"}},
		{Sandbox{Manifest: filepath.Join(dir, "missing.toml")}, []string{"sandbox.manifest", "missing.toml"}},
		{Sandbox{Manifest: pty}, []string{"asks for a terminal"}},
		{Sandbox{Manifest: limited}, []string{"limits output"}},
	} {
		cfg := ServerConfig{Name: "s", Command: []string{"/bin/cat"}, Sandbox: &c.sandbox}
		if err := cfg.check(); err != nil {
			t.Fatal(err)
		}
		_, err := cfg.spec()
		for _, want := range c.want {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%+v: error %v, want one saying %q", c.sandbox, err, want)
			}
		}
	}
}
