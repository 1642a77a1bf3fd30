package mcp

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sandbox"
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
		{ServerConfig{Name: "a", URL: "http://h/mcp", Cwd: "/tmp"}, "env, env_pass and cwd apply to a stdio server"},
		{ServerConfig{Name: "a", URL: "http://h/mcp", EnvPass: []string{"HOME"}}, "env, env_pass and cwd apply to a stdio server"},
		{ServerConfig{Name: "a", Command: []string{"x"}, EnvPass: []string{"A=b"}}, `env_pass[0]: "A=b" is not a variable name`},
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

// TestServerEnvironment: a stdio server's environment holds only what is
// named (the minimal one, env_pass, env), never the kernel's own: with
// OPENAI_API_KEY in the kernel's environment, a server configured with
// env = {LOG_LEVEL = "debug"} and no sandbox table, or with one, does not
// see it, while the variables named reach it. The server reads its own
// /proc/self/environ. Not parallel: it sets the test process's environment.
func TestServerEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-kairo-test-secret")
	t.Setenv("KAIRO_TEST_PASSED", "passed-by-name")
	named := func(cfg ServerConfig) ServerConfig {
		cfg.Env = map[string]string{"LOG_LEVEL": "debug"}
		cfg.EnvPass = []string{"KAIRO_TEST_PASSED", "KAIRO_TEST_NOT_SET"}
		return cfg
	}
	environ := func(t *testing.T, s *Server) map[string]string {
		t.Helper()
		vars := map[string]string{}
		for _, kv := range strings.Split(call(t, s, "read_file", `{"path":"/proc/self/environ"}`), "\x00") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				vars[k] = v
			}
		}
		return vars
	}
	check := func(t *testing.T, vars map[string]string, want map[string]string) {
		t.Helper()
		if v, ok := vars["OPENAI_API_KEY"]; ok && want["OPENAI_API_KEY"] == "" {
			t.Errorf("the server sees the kernel's OPENAI_API_KEY=%q; its environment: %v", v, vars)
		}
		for k, v := range want {
			if vars[k] != v {
				t.Errorf("%s=%q in the server's environment, want %q (all: %v)", k, vars[k], v, vars)
			}
		}
		if _, ok := vars["KAIRO_TEST_NOT_SET"]; ok {
			t.Errorf("a name in env_pass the kernel does not have was set: %v", vars)
		}
	}
	base := map[string]string{"LOG_LEVEL": "debug", "KAIRO_TEST_PASSED": "passed-by-name", "PATH": sandbox.DefaultPath}

	// The attack as it was found: no sandbox table, under a kernel that
	// does not sandbox (the whole environment went through) ...
	t.Run("NoSandboxTable", func(t *testing.T) {
		s := newEnv(t, nil).connect(named(stdio()))
		check(t, environ(t, s), base)
	})
	// ... and under `kairo up`, the default profile, which adds its own
	// HOME and TMPDIR. The test server is not in the default profile's
	// fs.exec, so this one checks the policy the launcher builds.
	t.Run("NoSandboxTableDefaultProfile", func(t *testing.T) {
		cfg := named(stdio())
		if err := cfg.check(); err != nil {
			t.Fatal(err)
		}
		spec, err := cfg.spec()
		if err != nil {
			t.Fatal(err)
		}
		if spec.Env == nil || spec.Policy != nil {
			t.Fatalf("spec.Env %v, spec.Policy set %v: want an environment given and the default profile", spec.Env, spec.Policy != nil)
		}
		vars := map[string]string{}
		for _, kv := range sandbox.Default("/work", "/tmp/t", spec.Env).Env {
			k, v, _ := strings.Cut(kv, "=")
			vars[k] = v
		}
		check(t, vars, map[string]string{"LOG_LEVEL": "debug", "KAIRO_TEST_PASSED": "passed-by-name", "HOME": "/work", "TMPDIR": "/tmp/t"})
	})
	if sandbox.LandlockABI() == 0 {
		t.Skip("this kernel has no Landlock: no sandboxed server to try")
	}
	helper, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sandboxed := newEnv(t, &proc.Sandboxed{Helper: helper, Root: reachableDir(t)})
	grants := func(pass ...string) *Sandbox {
		return &Sandbox{
			FS:  manifests.FSGrants{Exec: []string{serverBin}, Read: []string{"/proc"}},
			Env: manifests.EnvGrants{Pass: pass},
		}
	}
	t.Run("SandboxTable", func(t *testing.T) {
		cfg := named(stdio())
		cfg.Sandbox = grants()
		check(t, environ(t, sandboxed.connect(cfg)), base)
	})
	// The control: the operator passes the key by name, and it arrives.
	t.Run("SandboxTablePassesKeyByName", func(t *testing.T) {
		cfg := named(stdio())
		cfg.Sandbox = grants("OPENAI_API_KEY")
		want := map[string]string{"OPENAI_API_KEY": "sk-kairo-test-secret"}
		for k, v := range base {
			want[k] = v
		}
		check(t, environ(t, sandboxed.connect(cfg)), want)
	})
}
