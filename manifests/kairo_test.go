package manifests

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kairo.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDefaults(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("the embedded defaults do not validate: %v", err)
	}
	want := Config{
		Kernel:  KernelConfig{Socket: "", MaxFrame: 16 * MiB},
		Store:   StoreConfig{Kind: "sqlite", Path: "events.db", Synchronous: "normal", WALMax: 64 * MiB, RingSize: 1 << 20},
		Log:     LogConfig{Level: "info"},
		Sandbox: SandboxConfig{Mode: SandboxEnforce, UIDBase: 0x7fe00000, UIDCount: 1 << 16, StopGrace: "5s", WorkspaceMax: GiB},
		Host:    HostConfig{PluginsDir: "plugins", Builtins: true, CacheDir: ""},
		PluginLimits: PluginLimitsConfig{Deadline: "1s", Memory: 64 * MiB,
			MaxMemory: 256 * MiB, MaxDeadline: "5s", Public: []string{}, MaxFailures: 5, FailureWindow: "1m"},
		LLM: LLMConfig{BaseURL: "", Model: "", APIKeyEnv: "OPENAI_API_KEY", Timeout: "60s", MaxRetries: 3, Stream: true, MaxResponseBytes: 4 << 20},
		Agent: AgentConfig{ID: "default", Policy: "rules", Description: "the agent you talk to", ActsFor: []string{}, Memory: "own", Hz: 10, Overrun: "skip", MaxIterations: 25, MaxToolCalls: 16, QueryBackoff: 3, MinHz: 1, BargeIn: "boundary", TickSpin: "2ms", SkillsDir: "skills",
			Grants: AgentGrants{Skills: []string{"*"}, Commands: true, Folders: []string{}, Hosts: []string{}}},
		Router:    RouterConfig{MaxAskDepth: 3, MaxAsks: 8},
		Memory:    MemoryConfig{Enabled: true, Path: "memory.db", Recall: 3},
		Secrets:   SecretsConfig{Dir: "secrets"},
		Telemetry: TelemetryConfig{OTLPProtocol: OTLPHTTP, ServiceName: "kairo", MaxBacklog: DefaultMaxBacklog},
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("Default() = %+v\nwant %+v", c, want)
	}
	for _, path := range []string{"", filepath.Join(t.TempDir(), "missing.toml")} {
		got, err := Load(path)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Load(%q) = %+v, %v; want the defaults", path, got, err)
		}
	}
}

func TestLoadOverlays(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		check      func(Config) bool
	}{
		{"empty file", "", func(c Config) bool { return reflect.DeepEqual(c, Default()) }},
		{"comments only", "# nothing here\n\n", func(c Config) bool { return reflect.DeepEqual(c, Default()) }},
		{"max_frame string", "[kernel]\nmax_frame = \"512KiB\"\n", func(c Config) bool {
			return c.Kernel.MaxFrame == 512*KiB && reflect.DeepEqual(c.Store, Default().Store)
		}},
		{"max_frame integer", "[kernel]\nmax_frame = 1048576\n", func(c Config) bool { return c.Kernel.MaxFrame == MiB }},
		{"memory store", "[store]\nkind = \"memory\"\nring_size = 1000\n", func(c Config) bool {
			return c.Store.Kind == "memory" && c.Store.RingSize == 1000 && c.Store.Synchronous == "normal"
		}},
		{"dotted keys", "store.synchronous = \"full\"\nlog.level = \"debug\"\n", func(c Config) bool {
			return c.Store.Synchronous == "full" && c.Log.Level == "debug"
		}},
		{"inline table", "kernel = { socket = \"/run/k.sock\" }\n", func(c Config) bool {
			return c.Kernel.Socket == "/run/k.sock" && c.Kernel.MaxFrame == 16*MiB
		}},
		{"a plugin override", "[plugins.echo]\nenabled = false\ncall = []\ndeadline = \"50ms\"\n", func(c Config) bool {
			op, ok := c.Plugins["echo"]
			return ok && op.Disabled() && op.Call != nil && len(op.Call) == 0 && op.Publish == nil && op.Deadline == "50ms"
		}},
		{"an llm endpoint", "[llm]\nbase_url = \"http://localhost:11434/v1\"\nmodel = \"llama3.2\"\napi_key_env = \"\"\nstream = false\n", func(c Config) bool {
			return c.LLM == LLMConfig{BaseURL: "http://localhost:11434/v1", Model: "llama3.2", Timeout: "60s", MaxRetries: 3, MaxResponseBytes: 4 << 20} &&
				c.LLM.Configured() && c.LLM.TimeoutDuration() == time.Minute
		}},
		{"llm retries and timeout", "llm.max_retries = 0\nllm.timeout = \"2m30s\"\n", func(c Config) bool {
			return c.LLM.MaxRetries == 0 && c.LLM.TimeoutDuration() == 150*time.Second && !c.LLM.Configured() && c.LLM.APIKeyEnv == "OPENAI_API_KEY"
		}},
		{"the defaults file itself", string(DefaultsTOML), func(c Config) bool { return reflect.DeepEqual(c, Default()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(writeConfig(t, tc.text))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if !tc.check(c) {
				t.Fatalf("Load gave %+v", c)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		line       int    // 0: no line expected
		key        string // expected Error.Key
		want       string // regexp the message must match
	}{
		{"syntax", "[store]\nkind = \"sqlite\nx = 1\n", 2, "store.kind", `TOML syntax: strings cannot contain newlines`},
		{"duplicate key", "[log]\nlevel = \"info\"\nlevel = \"debug\"\n", 3, "log.level", `TOML syntax: this key is already defined; define each key once`},
		{"unknown key", "[store]\nkind = \"memory\"\nkinds = \"sqlite\"\n", 3, "store.kinds",
			`unknown key; check its spelling or remove it \(\[store\] takes kind, path, synchronous, wal_max, ring_size, \[jetstream\]\)`},
		{"unknown table", "# a comment\n\n[bogus]\nx = 1\n", 3, "bogus",
			`unknown table or key; .*takes \[kernel\], \[store\], \[log\]`},
		{"unknown dotted key", "log.colour = true\n", 1, "log.colour", `unknown key`},
		{"string for int", "[store]\nring_size = \"big\"\n", 2, "store.ring_size", `"big" is a string, want an integer`},
		{"quoted int", "[store]\nring_size = \"100\"\n", 2, "store.ring_size", `"100" is a string, want an integer: write it without quotes`},
		{"int for string", "[store]\nkind = 3\n", 2, "store.kind", `3 is an integer, want a string`},
		{"bool for size", "[kernel]\n\nmax_frame = true\n", 3, "kernel.max_frame", `true is a boolean, want a size`},
		{"value for table", "log = \"debug\"\n", 1, "log", `"debug" is a string, want a table`},
		{"bad size", "[kernel]\nmax_frame = \"16 parsecs\"\n", 2, "kernel.max_frame", `unknown unit "parsecs"`},
		{"size too small", "[kernel]\nmax_frame = 10\n", 2, "kernel.max_frame", `10B is out of range; give a size between 1KiB and 1GiB`},
		{"bad kind", "[store]\nkind = \"postgres\"\n", 2, "store.kind", `"postgres" is not a store kind; want "sqlite", "memory" or "jetstream"`},
		{"bad synchronous", "[store]\nsynchronous = \"off\"\n", 2, "store.synchronous", `"off": want "normal" .* or "full"`},
		{"empty path", "[store]\npath = \"\"\n", 2, "store.path", `is empty`},
		{"zero ring", "store.ring_size = 0\n", 1, "store.ring_size", `at least 1 event`},
		{"small wal", "[store]\nwal_max = \"64KiB\"\n", 2, "store.wal_max", `64KiB is under the least, 1MiB`},
		{"bad level", "[log]\nlevel = \"loud\"\n", 2, "log.level", `"loud" is not a log level`},
		{"bad agent rate", "[agent]\nhz = 0\n", 2, "agent.hz", `0: want a rate above 0`},
		{"bad overrun", "[agent]\noverrun = \"later\"\n", 2, "agent.overrun", `"later": want "skip"`},
		{"bad failure window", "[plugin_limits]\nfailure_window = \"soon\"\n", 2, "plugin_limits.failure_window", `"soon" is not a positive duration`},
		{"no failures allowed", "[plugin_limits]\nmax_failures = 0\n", 2, "plugin_limits.max_failures", `at least 1 failure`},
		{"plugin limit in the old [host]", "[host]\nname = \"a\"\nmemory = \"128MiB\"\n", 3, "host.memory",
			`\[host\] memory was renamed to \[plugin_limits\] memory: move it to that table`},
		{"dotted plugin limit in the old [host]", "host.max_failures = 3\n", 1, "host.max_failures", `renamed to \[plugin_limits\] max_failures`},
		{"bad plugin deadline", "[plugins.echo]\ndeadline = \"-1s\"\n", 2, "plugins.echo.deadline", `deadline "-1s" is not a positive duration`},
		{"bad plugin name", "[plugins.Echo]\ntrusted = true\n", 1, "plugins.Echo", `"Echo" is not a plugin name`},
		{"unknown plugin key", "[plugins.echo]\ntrust = true\n", 2, "plugins.echo.trust", `unknown key`},
		{"llm api key in the file", "[llm]\napi_key = \"sk-123\"\n", 2, "llm.api_key",
			`unknown key; .*\(\[llm\] takes base_url, model, api_key_env, timeout, max_retries, stream, max_response_bytes\)`},
		{"llm key for its name", "[llm]\nbase_url = \"https://api.openai.com/v1\"\nmodel = \"m\"\napi_key_env = \"sk-proj-abc\"\n", 4, "llm.api_key_env",
			`"sk-proj-abc" is not an environment variable name; give the NAME`},
		{"llm url without scheme", "[llm]\nbase_url = \"localhost:11434\"\nmodel = \"m\"\n", 2, "llm.base_url", `is not an http\(s\) URL`},
		{"llm url with credentials", "[llm]\nmodel = \"m\"\nbase_url = \"https://me:secret@example.com/v1\"\n", 3, "llm.base_url", `holds credentials`},
		{"llm without model", "[llm]\nbase_url = \"http://localhost:8000/v1\"\n", 1, "llm.model", `is empty; name the model`},
		{"llm bad timeout", "[llm]\ntimeout = \"0s\"\n", 2, "llm.timeout", `"0s" is not a positive duration`},
		{"llm retries out of range", "[llm]\nmax_retries = -1\n", 2, "llm.max_retries", `-1 is out of range; want 0 \(no retry\) to 10`},
		{"llm stream as string", "[llm]\nstream = \"yes\"\n", 2, "llm.stream", `"yes" is a string, want true or false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.text)
			_, err := Load(path)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Load: error %v (%T), want a *manifests.Error", err, err)
			}
			if e.File != path || e.Line != tc.line || e.Key != tc.key {
				t.Errorf("error at %s:%d key %q, want %s:%d key %q", e.File, e.Line, e.Key, path, tc.line, tc.key)
			}
			if !regexp.MustCompile(tc.want).MatchString(e.Msg) {
				t.Errorf("message %q does not match %q", e.Msg, tc.want)
			}
			// The whole error reads "file:line: key: message".
			prefix := path + ":"
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("error %q does not start with %q", err, prefix)
			}
		})
	}
}

func TestLoadReportsEveryInvalidField(t *testing.T) {
	path := writeConfig(t, "[store]\nkind = \"postgres\"\nsynchronous = \"off\"\n")
	_, err := Load(path)
	for _, want := range []string{path + ":2: store.kind:", path + ":3: store.synchronous:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not contain %q", err, want)
		}
	}
}

func TestLoadUnreadable(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "read config") {
		t.Fatalf("Load(a folder) = %v, want a read error", err)
	}
}

func TestPaths(t *testing.T) {
	t.Setenv("KAIRO_SOCKET", "")
	c := Default()
	if got := c.SocketPath("/h"); got != "/h/kernel.sock" {
		t.Errorf("SocketPath = %q", got)
	}
	c.Kernel.Socket = "run/k.sock"
	if got := c.SocketPath("/h"); got != "/h/run/k.sock" {
		t.Errorf("SocketPath = %q", got)
	}
	t.Setenv("KAIRO_SOCKET", "/env.sock")
	if got := c.SocketPath("/h"); got != "/env.sock" {
		t.Errorf("SocketPath with KAIRO_SOCKET = %q", got)
	}
	if got := c.StorePath("/h"); got != "/h/events.db" {
		t.Errorf("StorePath = %q", got)
	}
	c.Store.Path = "/var/kairo.db"
	if got := c.StorePath("/h"); got != "/var/kairo.db" {
		t.Errorf("StorePath = %q", got)
	}
}

func TestJetStreamConfig(t *testing.T) {
	load := func(text string) error {
		p := filepath.Join(t.TempDir(), "kairo.toml")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(p)
		return err
	}
	for _, good := range []string{
		"[store]\nkind = \"jetstream\"\n[store.jetstream]\nembedded = true\n",
		"[store]\nkind = \"jetstream\"\n[store.jetstream]\nurl = \"nats://a:4222, nats://b:4222\"\nreplicas = 3\nmax_age = \"720h\"\nmax_bytes = \"10GiB\"\ncreds = \"/etc/kairo.creds\"\n",
	} {
		if err := load(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	for _, bad := range []struct{ text, want string }{
		{"[store]\nkind = \"jetstream\"\n", "store.jetstream.embedded: the jetstream store needs embedded = true"},
		{"[store]\nkind = \"jetstream\"\n[store.jetstream]\nembedded = true\nurl = \"nats://a:4222\"\n", "not both"},
		{"[store]\nkind = \"jetstream\"\n[store.jetstream]\nurl = \"http://a:4222\"\n", "is not a NATS URL"},
		{"[store]\nkind = \"jetstream\"\n[store.jetstream]\nembedded = true\nreplicas = 3\n", "the embedded server is one node"},
		{"[store]\nkind = \"jetstream\"\n[store.jetstream]\nurl = \"nats://a:4222\"\ncert = \"/c.pem\"\n", "give cert and key together"},
		{"[store]\nkind = \"jetstream\"\n[store.jetstream]\nurl = \"nats://a:4222\"\nmax_age = \"forever\"\n", `"forever": give a duration`},
	} {
		if err := load(bad.text); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: got %v, want %q", bad.text, err, bad.want)
		}
	}
}
