package manifests

import (
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kairo-os/kairo/abi"
)

// DefaultsTOML is the embedded kairo.toml with every key at its default,
// documented. [Load] reads it before the operator's file.
//
//go:embed defaults/kairo.toml
var DefaultsTOML []byte

// Config is kairo.toml: what `kairo up` runs with.
type Config struct {
	Kernel  KernelConfig  `toml:"kernel"`
	Store   StoreConfig   `toml:"store"`
	Log     LogConfig     `toml:"log"`
	Sandbox SandboxConfig `toml:"sandbox"`
	Host    HostConfig    `toml:"host"`
	// PluginLimits are the defaults and ceilings every plugin runs
	// under ([plugin_limits]).
	PluginLimits PluginLimitsConfig `toml:"plugin_limits"`
	LLM          LLMConfig          `toml:"llm"`
	Agent        AgentConfig        `toml:"agent"`
	Memory       MemoryConfig       `toml:"memory"`
	Console      ConsoleConfig      `toml:"console"`
	// Approval says which tools need a person's yes ([approval]).
	Approval ApprovalConfig `toml:"approval"`
	// Plugins are the operator's word on each plugin, [plugins.NAME]: it
	// may turn one off, trust it, narrow its grants, change its limits.
	Plugins map[string]PluginOverride `toml:"plugins"`
	// MCP are the MCP servers whose tools the agent gets, [mcp.NAME].
	MCP map[string]MCPServer `toml:"mcp"`
}

// MCPServer is a [mcp.NAME] table: an MCP server the daemon starts (Command,
// over stdio) or reaches (URL, streamable HTTP), whose tools become the
// agent's tools mcp.NAME.TOOL.
type MCPServer struct {
	Command []string          `toml:"command"`
	URL     string            `toml:"url"`
	Env     map[string]string `toml:"env"`
	// EnvPass names variables of the daemon's environment the server is
	// given; no other variable of the daemon's reaches it.
	EnvPass []string `toml:"env_pass"`
	Cwd     string   `toml:"cwd"`
	// Sandbox confines a stdio server: a skill manifest's path, or grants
	// in a skill manifest's vocabulary; left out, the sandbox's default
	// profile.
	Sandbox *MCPSandbox `toml:"sandbox"`
	// ConnectTimeout and ShutdownGrace are durations such as "10s";
	// default 30s and 2s.
	ConnectTimeout string `toml:"connect_timeout"`
	ShutdownGrace  string `toml:"shutdown_grace"`
	// MaxTools caps the tools the server may list, default 256;
	// MaxResultBytes a tool's result, default 1MiB (0 for either: the
	// default).
	MaxTools       int  `toml:"max_tools"`
	MaxResultBytes Size `toml:"max_result_bytes"`
}

// MCPSandbox is [mcp.NAME.sandbox].
type MCPSandbox struct {
	Manifest string      `toml:"manifest"`
	FS       FSGrants    `toml:"fs"`
	Net      NetGrants   `toml:"net"`
	Env      EnvGrants   `toml:"env"`
	Limits   SkillLimits `toml:"limits"`
}

// HostConfig is the [host] table: this host — its name among the hosts
// that share a store — and where it finds its plugins. The limits its
// plugins run under are [PluginLimitsConfig].
type HostConfig struct {
	// Name is the host's name on a store several hosts share: stamped on
	// the events it publishes (abi.Event.Host) and on its process ids
	// ("p12@NAME"). Empty: see Config.HostName.
	Name string `toml:"name"`
	// PluginsDir is the drop-in folder, relative to KAIRO_HOME.
	PluginsDir string `toml:"plugins_dir"`
	// Builtins loads the plugins in the folder "plugins" beside the kairo
	// binary (where make puts the built-in plugins), trusted.
	Builtins bool `toml:"builtins"`
	// CacheDir keeps compiled plugins, relative to KAIRO_HOME. Empty, the
	// default: the user's compilation cache, shared by all their homes
	// (CachePath).
	CacheDir string `toml:"cache_dir"`
}

// PluginLimitsConfig is the [plugin_limits] table: the defaults and the
// ceilings of every plugin's memory and deadline, the subjects every
// drop-in may use without a grant, and how many failures a plugin is
// allowed.
type PluginLimitsConfig struct {
	// Deadline bounds each call into an untrusted plugin, unless its
	// manifest or [plugins.NAME] says otherwise.
	Deadline string `toml:"deadline"`
	// Memory caps each plugin's memory, unless its manifest or
	// [plugins.NAME] says otherwise.
	Memory Size `toml:"memory"`
	// MaxMemory and MaxDeadline are ceilings: no manifest and no
	// [plugins.NAME] gets more; a plugin that asks more runs with the
	// ceiling, and `kairo plugins` says it was capped.
	MaxMemory   Size   `toml:"max_memory"`
	MaxDeadline string `toml:"max_deadline"`
	// Public are the subjects (patterns) every drop-in plugin may
	// subscribe to and publish on without a grant, besides its own
	// namespace plugin.NAME.>.
	Public []string `toml:"public"`
	// MaxFailures failures of a plugin within FailureWindow leave it
	// stopped; before that, each failure restarts it after a pause that
	// doubles from 100ms up to 30s.
	MaxFailures   int    `toml:"max_failures"`
	FailureWindow string `toml:"failure_window"`
}

// DeadlineDuration is Deadline parsed; valid once Validate passed.
func (l PluginLimitsConfig) DeadlineDuration() time.Duration {
	d, _ := time.ParseDuration(l.Deadline)
	return d
}

// MaxDeadlineDuration is MaxDeadline parsed; valid once Validate passed.
func (l PluginLimitsConfig) MaxDeadlineDuration() time.Duration {
	d, _ := time.ParseDuration(l.MaxDeadline)
	return d
}

// FailureWindowDuration is FailureWindow parsed; valid once Validate passed.
func (l PluginLimitsConfig) FailureWindowDuration() time.Duration {
	d, _ := time.ParseDuration(l.FailureWindow)
	return d
}

// MaxHostName is the longest [host] name.
const MaxHostName = 64

// validHostName reports whether name is 1 to MaxHostName of [A-Za-z0-9._-].
func validHostName(name string) bool {
	if name == "" || len(name) > MaxHostName {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// HostName is the daemon's name among the hosts that share its store:
// [host] name; else, on a store others can reach (JetStream at a url, or an
// embedded server that listens), the machine's host name; else "": the
// store is this host's alone, and its events and process ids carry no name.
func (c *Config) HostName() string {
	if c.Host.Name != "" {
		return c.Host.Name
	}
	j := c.Store.JetStream
	if c.Store.Kind != StoreJetStream || (j.URL == "" && j.Listen == "") {
		return ""
	}
	name, err := os.Hostname()
	if err != nil || name == "" {
		return "localhost"
	}
	return sanitizeHostName(name)
}

// sanitizeHostName makes the machine's name a valid [host] name: each
// other character a "-", cut to MaxHostName.
func sanitizeHostName(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !validHostName(string(c)) {
			b[i] = '-'
		}
	}
	if len(b) > MaxHostName {
		b = b[:MaxHostName]
	}
	return string(b)
}

// PluginsPath is the drop-in folder of a daemon whose data folder is home.
func (c *Config) PluginsPath(home string) string { return underHome(home, c.Host.PluginsDir) }

// SkillsPath is the agent's skills folder for a daemon whose data folder is
// home.
func (c *Config) SkillsPath(home string) string { return underHome(home, c.Agent.SkillsDir) }

// CachePath is the compilation cache of a daemon whose data folder is home:
// [host] cache_dir when set, else [UserCachePath].
func (c *Config) CachePath(home string) string {
	if c.Host.CacheDir != "" {
		return underHome(home, c.Host.CacheDir)
	}
	return UserCachePath(home)
}

// UserCachePath is the compilation cache every home of the user shares,
// kairo/wasm in the user's cache folder: $XDG_CACHE_HOME, else ~/.cache. A
// user without one (no $HOME) gets the folder "cache" of the home.
func UserCachePath(home string) string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "kairo", "wasm")
	}
	return filepath.Join(home, "cache")
}

// MemoryPath is the long-term memory's SQLite file.
func (c *Config) MemoryPath(home string) string { return underHome(home, c.Memory.Path) }

// ConsoleConfig is the [console] table: the web page `kairo up` serves.
// Off by default; when on, on a loopback address unless AllowRemote says
// otherwise.
type ConsoleConfig struct {
	// Listen is the console's address, "127.0.0.1:8765"; "" (the default)
	// turns it off. Port 0 picks a free port.
	Listen string `toml:"listen"`
	// AllowRemote lets Listen be an address other machines reach; false
	// refuses one. The daemon warns when it listens so.
	AllowRemote bool `toml:"allow_remote"`
}

// Loopback reports whether Listen is a loopback address: 127.0.0.0/8,
// ::1 or "localhost". Valid once Validate passed.
func (c ConsoleConfig) Loopback() bool { return Loopback(c.Listen) }

func (c *ConsoleConfig) validate() []*Error {
	if c.Listen == "" {
		return nil
	}
	bad := func(format string, args ...any) []*Error {
		return []*Error{{Key: "console.listen", Msg: fmt.Sprintf(format, args...)}}
	}
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return bad("%q is not an address; write HOST:PORT, such as \"127.0.0.1:8765\" (or \"\" to turn the console off)", c.Listen)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return bad("%q: the port %q is not a number from 0 to 65535; write HOST:PORT, such as \"127.0.0.1:8765\"", c.Listen, port)
	}
	if host == "" {
		return bad("%q names no host; write \"127.0.0.1:%s\" (or \"0.0.0.0:%s\" with [console] allow_remote = true, for every address)", c.Listen, port, port)
	}
	if host != "localhost" {
		if _, err := netip.ParseAddr(host); err != nil {
			return bad("%q: the host %q is not an IP address; write an address, such as \"127.0.0.1:8765\" (a name would be looked up, and could change)", c.Listen, host)
		}
	}
	if !c.Loopback() && !c.AllowRemote {
		return bad("%q is not a loopback address: the console would be reachable from other machines; listen on \"127.0.0.1:%s\", or set [console] allow_remote = true to mean it", c.Listen, port)
	}
	return nil
}

// MemoryConfig is the [memory] table: what the agent remembers.
type MemoryConfig struct {
	// Enabled keeps a long-term memory of the run loops that ended.
	Enabled bool `toml:"enabled"`
	// Path is its SQLite file, relative to KAIRO_HOME.
	Path string `toml:"path"`
	// KeepReasoning stores the policy's thoughts too; off, only public
	// actions, results and summaries (seed 000 §4.2).
	KeepReasoning bool `toml:"keep_reasoning"`
	// Recall is how many chunks of earlier run loops a new one is given.
	Recall int `toml:"recall"`
	// Embeddings, when BaseURL is set, adds vector similarity to full-text
	// search.
	Embeddings EmbeddingsConfig `toml:"embeddings"`
}

// EmbeddingsConfig is [memory.embeddings]: an OpenAI-compatible
// /v1/embeddings endpoint.
type EmbeddingsConfig struct {
	BaseURL    string `toml:"base_url"`
	Model      string `toml:"model"`
	APIKeyEnv  string `toml:"api_key_env"`
	Dimensions int    `toml:"dimensions"`
}

// AgentConfig is the [agent] table: the agent kairo up runs.
type AgentConfig struct {
	ID     string  `toml:"id"`     // routes kairo.agent.{id}.message
	Policy string  `toml:"policy"` // the policy plugin's name
	Hz     float64 `toml:"hz"`
	// Overrun is "skip" (drop late ticks) or "catch_up" (run them all).
	Overrun       string  `toml:"overrun"`
	MaxIterations int     `toml:"max_iterations"`
	MaxToolCalls  int     `toml:"max_tool_calls"` // per decision
	QueryBackoff  int     `toml:"query_backoff"`
	MinHz         float64 `toml:"min_hz"`
	// BargeIn is "boundary", "queue" or "preempt": see the defaults file.
	BargeIn string `toml:"barge_in"`
	// SkillsDir holds binary skills, each a folder with a skill.toml, that
	// the agent runs by name; relative to KAIRO_HOME.
	SkillsDir string `toml:"skills_dir"`
	// TickSpin is how long before each tick the loop spins instead of
	// sleeping; "0s" for never.
	TickSpin string `toml:"tick_spin"`
	// Grants bound what the model's tool calls may start.
	Grants AgentGrants `toml:"grants"`
}

// AgentGrants is [agent.grants]: the agent's authority when it acts for a
// run loop, which is the model's. What it starts holds no more.
type AgentGrants struct {
	// Skills are the installed skills it may run by name ("*": all), each
	// under its own manifest's grants.
	Skills []string `toml:"skills"`
	// Commands lets it run programs of its choosing, under the default
	// profile.
	Commands bool `toml:"commands"`
	// Folders are where its commands may work (and write, as far as the
	// folder's owner lets the sandbox's uid) besides the workspaces Kairo
	// makes; absolute paths.
	Folders []string `toml:"folders"`
}

// TickSpinDuration is TickSpin parsed; valid once Validate passed.
func (a AgentConfig) TickSpinDuration() time.Duration {
	d, _ := time.ParseDuration(a.TickSpin)
	return d
}

// LLMConfig is the [llm] table: the OpenAI-compatible endpoint behind the
// host method llm.chat.
type LLMConfig struct {
	// BaseURL is the endpoint's API root, such as "https://api.openai.com/v1"
	// or "http://localhost:11434/v1" (Ollama). Empty: no LLM is configured,
	// and llm.chat says how to configure one.
	BaseURL string `toml:"base_url"`
	// Model is asked for when a request names none.
	Model string `toml:"model"`
	// APIKeyEnv names the environment variable that holds the API key; the
	// key itself never goes in the file.
	APIKeyEnv string `toml:"api_key_env"`
	// Timeout bounds each HTTP request, from sending it to the last token.
	Timeout string `toml:"timeout"`
	// MaxRetries is how many times a request that met a rate limit (429), a
	// server error (5xx) or a dropped connection is sent again.
	MaxRetries int `toml:"max_retries"`
	// Stream asks for the answer as server-sent events.
	Stream bool `toml:"stream"`
	// MaxResponseBytes caps the body of each answer, read no further.
	MaxResponseBytes Size `toml:"max_response_bytes"`
}

// TimeoutDuration is Timeout parsed; valid once Validate passed.
func (l LLMConfig) TimeoutDuration() time.Duration {
	d, _ := time.ParseDuration(l.Timeout)
	return d
}

// Configured reports whether an endpoint is set.
func (l LLMConfig) Configured() bool { return l.BaseURL != "" }

// SandboxConfig is the [sandbox] table.
type SandboxConfig struct {
	Mode       string `toml:"mode"`        // "enforce" or "off"
	BestEffort bool   `toml:"best_effort"` // run what cannot be confined exactly, saying so
	// UIDBase and UIDCount are the range of uids the trees run as when the
	// kernel is root, one per tree, each with a primary gid of the same
	// number: above 65535, and no account or group of the machine in it.
	UIDBase  int64 `toml:"uid_base"`
	UIDCount int64 `toml:"uid_count"`
	// StopGrace is how long a clean stop lets each tree end after SIGTERM
	// before it kills the tree's cgroup, a duration such as "5s".
	StopGrace string `toml:"stop_grace"`
	// KeepWorkspaces keeps the workspaces Kairo makes after their tree
	// ends; by default they are removed.
	KeepWorkspaces bool `toml:"keep_workspaces"`
	// WorkspaceMax caps what a spawn's workspace and temp folder hold.
	WorkspaceMax Size `toml:"workspace_max"`
	// Limits replace the default profile's limits (sandbox.DefaultLimits)
	// where set; 0 keeps the profile's.
	Limits SkillLimits `toml:"limits"`
	// Audit is how a root kernel learns what the sandbox refused, from
	// the Linux audit subsystem: SandboxAuditAuto (also "") turns audit
	// on while a kairo runs if it is off, SandboxAuditOff leaves audit
	// alone and reports no refusal.
	Audit string `toml:"audit"`
}

// Values of [sandbox] audit.
const (
	SandboxAuditAuto = "auto"
	SandboxAuditOff  = "off"
)

// StopGraceDuration is StopGrace parsed; valid once Validate passed.
func (s SandboxConfig) StopGraceDuration() time.Duration {
	d, _ := time.ParseDuration(s.StopGrace)
	return d
}

// The bounds of the sandbox uid range: above the 16-bit uids that
// accounts, nobody (65534) and older tools use, below (uid_t)-1.
const (
	MinSandboxUID = 65536
	MaxSandboxUID = 1<<32 - 2
)

// passwdFiles are the account and group databases the uid range is
// checked against (tests point them elsewhere).
var passwdFiles = [2]string{"/etc/passwd", "/etc/group"}

func (s *SandboxConfig) validate() []*Error {
	var errs []*Error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	switch s.Mode {
	case SandboxEnforce, SandboxOff:
	default:
		bad("sandbox.mode", "%q: want %q (every binary runs confined) or %q (binaries run as they are: development only)", s.Mode, SandboxEnforce, SandboxOff)
	}
	switch {
	case s.UIDBase < MinSandboxUID || s.UIDBase > MaxSandboxUID:
		bad("sandbox.uid_base", "%d: want a uid from %d to %d, above the accounts' range, such as 2145386496 (0x7fe00000)", s.UIDBase, MinSandboxUID, MaxSandboxUID)
	case s.UIDCount < 1 || s.UIDBase+s.UIDCount-1 > MaxSandboxUID:
		bad("sandbox.uid_count", "%d: want from 1 to %d uids from uid_base %d (one per process tree running at once)", s.UIDCount, MaxSandboxUID-s.UIDBase+1, s.UIDBase)
	default:
		for i, file := range passwdFiles {
			if name, id := idInRange(file, s.UIDBase, s.UIDBase+s.UIDCount); name != "" {
				what := [2]string{"account", "group"}[i]
				bad("sandbox.uid_base", "the range %d-%d holds the %s %s (%d in %s): a tree would run with its rights; move uid_base or shrink uid_count", s.UIDBase, s.UIDBase+s.UIDCount-1, what, name, id, file)
			}
		}
	}
	switch s.Audit {
	case "", SandboxAuditAuto, SandboxAuditOff:
	default:
		bad("sandbox.audit", "%q: want %q (learn the sandbox's refusals from the audit subsystem, turning it on while kairo runs) or %q (leave audit alone)", s.Audit, SandboxAuditAuto, SandboxAuditOff)
	}
	if d, err := time.ParseDuration(s.StopGrace); err != nil || d < 0 {
		bad("sandbox.stop_grace", "%q is not a duration; write it as \"5s\" (\"0s\" kills at once)", s.StopGrace)
	}
	l := s.Limits
	for _, v := range []struct {
		key string
		n   int
	}{{"cpu_seconds", l.CPUSeconds}, {"wall_seconds", l.WallSeconds}, {"processes", l.Processes}, {"open_files", l.OpenFiles}} {
		if v.n < 0 {
			bad("sandbox.limits."+v.key, "%d is negative; 0 keeps the default profile's", v.n)
		}
	}
	return errs
}

// idInRange is the first entry of a passwd or group file whose id is in
// [lo, hi): its name and id; "" when none is (or the file cannot be read).
func idInRange(file string, lo, hi int64) (string, int64) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 3 {
			continue
		}
		var id int64
		if _, err := fmt.Sscan(f[2], &id); err == nil && id >= lo && id < hi {
			return f[0], id
		}
	}
	return "", 0
}

// Sandbox modes.
const (
	SandboxEnforce = "enforce"
	SandboxOff     = "off"
)

// KernelConfig is the [kernel] table.
type KernelConfig struct {
	// Socket overrides $KAIRO_HOME/kernel.sock; relative to KAIRO_HOME.
	Socket string `toml:"socket"`
	// MaxFrame bounds a request frame from a client.
	MaxFrame Size `toml:"max_frame"`
}

// StoreConfig is the [store] table.
type StoreConfig struct {
	Kind        string `toml:"kind"`        // "sqlite", "memory" or "jetstream"
	Path        string `toml:"path"`        // SQLite file, relative to KAIRO_HOME
	Synchronous string `toml:"synchronous"` // "normal" or "full"
	WALMax      Size   `toml:"wal_max"`     // bound of the SQLite write-ahead log
	RingSize    int    `toml:"ring_size"`   // events the memory store holds
	// JetStream is [store.jetstream], for kind "jetstream".
	JetStream JetStreamConfig `toml:"jetstream"`
}

// JetStreamConfig is [store.jetstream]: the bus on NATS JetStream, either
// a server Kairo starts in its own process (Embedded) or an existing
// cluster (URL and its credentials).
type JetStreamConfig struct {
	// Embedded starts a nats-server with JetStream inside kairo, storing
	// under Dir (relative to KAIRO_HOME; default "jetstream"): one host, no
	// extra process.
	Embedded bool   `toml:"embedded"`
	Dir      string `toml:"dir"`
	// Listen, with Embedded, serves the stream to the hosts of Peers on
	// this address (HOST:PORT): a loopback address unless AllowRemote.
	// Each peer logs in with a password made at the first start, in
	// JETSTREAM_DIR/peers/NAME.password, and may append only as itself
	// (jetstream.HostPermissions in kernel/bus/jetstream).
	Listen      string   `toml:"listen"`
	Peers       []string `toml:"peers"`
	AllowRemote bool     `toml:"allow_remote"`
	// URL is the cluster's ("nats://host:4222", several separated by
	// commas); with it, Creds (a credentials file), NKey (an nkey seed
	// file), and TLS's CA, Cert and Key files, as the cluster asks.
	URL   string `toml:"url"`
	Creds string `toml:"creds"`
	NKey  string `toml:"nkey"`
	CA    string `toml:"ca"`
	Cert  string `toml:"cert"`
	Key   string `toml:"key"`
	// User and PasswordFile (relative to KAIRO_HOME) log in to the
	// server at URL with a password, as a peer of another host's embedded
	// server does; User defaults to this host's name.
	User         string `toml:"user"`
	PasswordFile string `toml:"password_file"`
	// OpenTimeout is how long kairo up tries to reach the server and find
	// or create the stream while the cluster is not ready ("60s", the
	// default).
	OpenTimeout string `toml:"open_timeout"`
	// Stream is the stream's name (default "KAIRO"); Replicas its copies
	// in a cluster (default 1); MaxAge ("720h") and MaxBytes ("10GiB")
	// bound what it keeps (default: no bound).
	Stream   string `toml:"stream"`
	Replicas int    `toml:"replicas"`
	MaxAge   string `toml:"max_age"`
	MaxBytes Size   `toml:"max_bytes"`
	// Timeout bounds each wait for the cluster, an acknowledgement or a
	// request ("2s", the default); an append in flight when a stream's
	// leader dies waits this long before the bus takes the store for
	// away. ReconnectWait is how long the client waits before it tries a
	// server it lost again ("500ms", the default).
	Timeout       string `toml:"timeout"`
	ReconnectWait string `toml:"reconnect_wait"`
}

// TimeoutDuration is Timeout parsed; 0 (the store's default) when empty.
func (j JetStreamConfig) TimeoutDuration() time.Duration {
	d, _ := time.ParseDuration(j.Timeout)
	return d
}

// ReconnectWaitDuration is ReconnectWait parsed; 0 (the store's default)
// when empty.
func (j JetStreamConfig) ReconnectWaitDuration() time.Duration {
	d, _ := time.ParseDuration(j.ReconnectWait)
	return d
}

// OpenTimeoutDuration is OpenTimeout parsed; 0 (the store's default)
// when empty.
func (j JetStreamConfig) OpenTimeoutDuration() time.Duration {
	d, _ := time.ParseDuration(j.OpenTimeout)
	return d
}

// PasswordPath is PasswordFile under the data folder home; "" when it is
// not given.
func (j JetStreamConfig) PasswordPath(home string) string {
	if j.PasswordFile == "" {
		return ""
	}
	return underHome(home, j.PasswordFile)
}

// MaxAgeDuration is MaxAge parsed; 0 when it is empty.
func (j JetStreamConfig) MaxAgeDuration() time.Duration {
	d, _ := time.ParseDuration(j.MaxAge)
	return d
}

func (j JetStreamConfig) validate() []*Error {
	var errs []*Error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{Key: "store.jetstream." + key, Msg: fmt.Sprintf(format, args...)})
	}
	switch {
	case j.Embedded && j.URL != "":
		bad("url", "%q: give embedded = true (a server inside kairo) or url (an existing cluster), not both", RedactURL(j.URL))
	case !j.Embedded && j.URL == "":
		bad("embedded", "the jetstream store needs embedded = true (a server inside kairo) or url = \"nats://host:4222\" (an existing cluster)")
	}
	for _, u := range strings.Split(j.URL, ",") {
		if u = strings.TrimSpace(u); u == "" && j.URL != "" {
			bad("url", "%q has an empty entry; separate the servers' URLs with commas", RedactURL(j.URL))
		} else if u != "" {
			pu, err := url.Parse(u)
			if err != nil || (pu.Scheme != "nats" && pu.Scheme != "tls") || pu.Host == "" {
				bad("url", "%q is not a NATS URL; write nats://host:4222 (or tls://host:4222)", RedactURL(u))
			}
		}
	}
	if j.Listen != "" {
		if !j.Embedded {
			bad("listen", "%q: listen is for the embedded server (embedded = true); a cluster at url has its own", j.Listen)
		} else if host, port, err := net.SplitHostPort(j.Listen); err != nil || host == "" {
			bad("listen", "%q is not an address; write HOST:PORT, such as \"127.0.0.1:4222\"", j.Listen)
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			bad("listen", "%q: the port %q is not a number from 0 to 65535; write HOST:PORT, such as \"127.0.0.1:4222\"", j.Listen, port)
		}
	}
	if j.Embedded {
		for key, v := range map[string]string{"creds": j.Creds, "nkey": j.NKey, "ca": j.CA, "cert": j.Cert, "key": j.Key} {
			if v != "" {
				bad(key, "is for a cluster at url; the embedded server needs none")
			}
		}
	}
	if (j.Cert == "") != (j.Key == "") {
		bad("cert", "give cert and key together (the client's certificate and its key)")
	}
	if j.Replicas < 0 || j.Replicas > 5 {
		bad("replicas", "%d: JetStream keeps 1 to 5 replicas of a stream", j.Replicas)
	}
	if j.Embedded && j.Replicas > 1 {
		bad("replicas", "%d: the embedded server is one node; replicas are a cluster's (give url)", j.Replicas)
	}
	if j.MaxAge != "" {
		if d, err := time.ParseDuration(j.MaxAge); err != nil || d <= 0 {
			bad("max_age", "%q: give a duration such as \"720h\", or leave it out to keep events forever", j.MaxAge)
		}
	}
	for key, v := range map[string]string{"timeout": j.Timeout, "reconnect_wait": j.ReconnectWait} {
		if d, err := time.ParseDuration(v); v != "" && (err != nil || d <= 0 || d > time.Hour) {
			bad(key, "%q: give a duration such as \"2s\" or \"500ms\" (at most an hour), or leave it out for the default", v)
		}
	}
	j.validateAccess(bad)
	if j.Stream != "" && strings.ContainsAny(j.Stream, " \t.*>/\\") {
		bad("stream", "%q: a stream name has no spaces, dots, wildcards or slashes", j.Stream)
	}
	return errs
}

// validateAccess checks who may log in: the peers of an embedded server
// that listens, on what address, and the user of a url.
func (j JetStreamConfig) validateAccess(bad func(key, format string, args ...any)) {
	switch {
	case j.Listen != "" && j.Embedded && len(j.Peers) == 0:
		bad("listen", "%q serves the stream to other hosts: name them, peers = [\"build-2\"], and each gets a password in the jetstream folder, peers/NAME.password", j.Listen)
	case j.Listen == "" && len(j.Peers) > 0:
		bad("peers", "peers join an embedded server that listens; give embedded = true and listen = \"127.0.0.1:4222\" too")
	case j.Listen != "" && !j.AllowRemote && !Loopback(j.Listen):
		if _, port, err := net.SplitHostPort(j.Listen); err == nil && port != "" {
			bad("listen", "%q is not a loopback address: other machines could reach the stream; listen on \"127.0.0.1:%s\", or set allow_remote = true to mean it (the peers' passwords cross the network in clear: a trusted network only)", j.Listen, port)
		}
	case j.AllowRemote && j.Listen == "":
		bad("allow_remote", "is for listen, which serves the embedded stream to other hosts; leave it out")
	}
	seen := map[string]bool{}
	for _, p := range j.Peers {
		switch {
		case !validHostName(p) || strings.Trim(p, ".") != p || strings.Contains(p, ".."):
			bad("peers", "%q is not a host name: 1 to %d letters, digits, \"-\", \"_\", and dots between them, as the peer's [host] name", p, MaxHostName)
		case seen[p]:
			bad("peers", "%q is named twice", p)
		}
		seen[p] = true
	}
	switch {
	case j.PasswordFile != "" && j.URL == "":
		bad("password_file", "logs in to a server at url; the embedded server makes its peers' passwords itself")
	case j.User != "" && j.PasswordFile == "":
		bad("user", "%q needs password_file, the file that holds its password (a peer's is the serving host's jetstream/peers/NAME.password)", j.User)
	case j.PasswordFile != "" && (j.Creds != "" || j.NKey != ""):
		bad("password_file", "give one way to log in: password_file, creds or nkey")
	case j.PasswordFile != "" && strings.Contains(j.URL, "@"):
		bad("password_file", "the url holds credentials already; give one way to log in: take them out of the url")
	}
	if j.OpenTimeout != "" {
		if d, err := time.ParseDuration(j.OpenTimeout); err != nil || d <= 0 || d > 24*time.Hour {
			bad("open_timeout", "%q: give a duration such as \"60s\" or \"5m\" (at most a day), or leave it out for the default, 60s", j.OpenTimeout)
		}
	}
}

// MinWALMax is the least store.wal_max.
const MinWALMax = MiB

// LogConfig is the [log] table.
type LogConfig struct {
	Level string `toml:"level"` // "debug", "info", "warn" or "error"
}

// Store kinds.
const (
	StoreSQLite    = "sqlite"
	StoreMemory    = "memory"
	StoreJetStream = "jetstream"
)

// Bounds of kernel.max_frame: a frame must hold a useful event, and a
// client must not make the kernel buffer an arbitrary amount.
const (
	MinMaxFrame = KiB
	MaxMaxFrame = GiB
)

// Default returns the embedded defaults.
func Default() Config {
	var c Config
	if err := decodeFile("defaults/kairo.toml (embedded)", DefaultsTOML, &c); err != nil {
		panic("manifests: the embedded kairo.toml is broken: " + err.Error())
	}
	return c
}

// Load returns the defaults overlaid with the file at path, validated. A
// path that does not exist (or "") gives the defaults. Every error is an
// [*Error], or several joined, naming the file, the line and the key. It
// reads only a regular file of at most [MaxConfigSize] bytes (see readFile).
func Load(path string) (Config, error) {
	c := Default()
	if path == "" {
		return c, c.Validate()
	}
	text, err := readFile(path, MaxConfigSize)
	if errors.Is(err, fs.ErrNotExist) {
		return c, c.Validate()
	}
	if err != nil {
		return c, fmt.Errorf("read config: %w", err)
	}
	if err := decodeFile(path, text, &c); err != nil {
		return c, err
	}
	errs := c.validate()
	more := 0
	if len(errs) > maxErrors {
		errs, more = errs[:maxErrors], len(errs)-maxErrors
	}
	for _, e := range errs {
		e.File = path
		e.Line = keyLine(text, splitKey(e.Key))
	}
	return c, joinErrors(append(errs, moreErrors(path, more)...))
}

// Validate checks every value; the errors name the fields.
func (c *Config) Validate() error { return joinErrors(c.validate()) }

func (c *Config) validate() []*Error {
	var errs []*Error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if c.Kernel.MaxFrame < MinMaxFrame || c.Kernel.MaxFrame > MaxMaxFrame {
		bad("kernel.max_frame", "%s is out of range; give a size between %s and %s, such as \"16MiB\"", c.Kernel.MaxFrame, MinMaxFrame, MaxMaxFrame)
	}
	switch c.Store.Kind {
	case StoreSQLite:
		if c.Store.Path == "" {
			bad("store.path", "is empty; name the SQLite file, such as \"events.db\" (relative to KAIRO_HOME)")
		}
	case StoreMemory:
	case StoreJetStream:
		errs = append(errs, c.Store.JetStream.validate()...)
	default:
		bad("store.kind", "%q is not a store kind; want %q, %q or %q", c.Store.Kind, StoreSQLite, StoreMemory, StoreJetStream)
	}
	switch c.Store.Synchronous {
	case "normal", "full":
	default:
		bad("store.synchronous", "%q: want \"normal\" (survives a crash of the process) or \"full\" (survives a power loss too)", c.Store.Synchronous)
	}
	if c.Store.WALMax < MinWALMax {
		bad("store.wal_max", "%s is under the least, %s; give a size such as \"64MiB\"", c.Store.WALMax, MinWALMax)
	}
	if c.Store.RingSize < 1 {
		bad("store.ring_size", "%d: the memory store needs room for at least 1 event", c.Store.RingSize)
	}
	errs = append(errs, c.Sandbox.validate()...)
	errs = append(errs, c.Approval.validate()...)
	if _, err := c.Log.SlogLevel(); err != nil {
		bad("log.level", "%v", err)
	}
	if n := c.Host.Name; n != "" && !validHostName(n) {
		bad("host.name", "%q: a host name is 1 to %d of the letters A-Z and a-z, the digits and \".\", \"_\", \"-\", such as \"build-2\" (or leave it out: see Config.HostName)", n, MaxHostName)
	}
	if c.Host.PluginsDir == "" {
		bad("host.plugins_dir", "is empty; name the drop-in folder, such as \"plugins\" (relative to KAIRO_HOME)")
	}
	if msg := checkPluginLimits(c.PluginLimits.Memory, c.PluginLimits.Deadline); msg != "" {
		key := "plugin_limits.memory"
		if strings.HasPrefix(msg, "deadline") {
			key = "plugin_limits.deadline"
		}
		bad(key, "%s", msg)
	}
	if msg := checkPluginLimits(c.PluginLimits.MaxMemory, c.PluginLimits.MaxDeadline); msg != "" {
		key := "plugin_limits.max_memory"
		if strings.HasPrefix(msg, "deadline") {
			key = "plugin_limits.max_deadline"
		}
		bad(key, "%s", msg)
	} else {
		if c.PluginLimits.MaxMemory == 0 {
			bad("plugin_limits.max_memory", "is missing; give the most memory a plugin may have, such as \"256MiB\"")
		} else if c.PluginLimits.MaxMemory < c.PluginLimits.Memory {
			bad("plugin_limits.max_memory", "%s is below plugin_limits.memory (%s), the default it caps; raise it or lower plugin_limits.memory", c.PluginLimits.MaxMemory, c.PluginLimits.Memory)
		}
		if c.PluginLimits.MaxDeadline == "" {
			bad("plugin_limits.max_deadline", "is missing; give the longest deadline a plugin may have, such as \"5s\"")
		} else if c.PluginLimits.MaxDeadlineDuration() < c.PluginLimits.DeadlineDuration() {
			bad("plugin_limits.max_deadline", "%s is below plugin_limits.deadline (%s), the default it caps; raise it or lower plugin_limits.deadline", c.PluginLimits.MaxDeadline, c.PluginLimits.Deadline)
		}
	}
	for _, pat := range c.PluginLimits.Public {
		if err := abi.ValidatePattern(pat); err != nil {
			bad("plugin_limits.public", "%v", err)
		}
	}
	if c.PluginLimits.MaxFailures < 1 {
		bad("plugin_limits.max_failures", "%d: a plugin must be allowed at least 1 failure before it stays stopped", c.PluginLimits.MaxFailures)
	}
	if d, err := time.ParseDuration(c.PluginLimits.FailureWindow); err != nil || d <= 0 {
		bad("plugin_limits.failure_window", "%q is not a positive duration; write it as \"1m\", \"30s\"", c.PluginLimits.FailureWindow)
	}
	errs = append(errs, c.LLM.validate()...)
	errs = append(errs, c.Agent.validate()...)
	errs = append(errs, c.Console.validate()...)
	names := slices.Sorted(maps.Keys(c.Plugins))
	for _, name := range names {
		op := c.Plugins[name]
		if len(name) > maxSkillName || !skillNameRE.MatchString(name) {
			bad("plugins."+name, "%q is not a plugin name: use lower-case letters, digits, \"_\" and \"-\"", name)
		}
		for _, msg := range op.Grants.Check() {
			key, msg, _ := strings.Cut(msg, ": ")
			bad("plugins."+name+".grants."+key, "%s", msg)
		}
		if msg := checkPluginLimits(op.Memory, op.Deadline); msg != "" {
			key := "plugins." + name + ".memory"
			if strings.HasPrefix(msg, "deadline") {
				key = "plugins." + name + ".deadline"
			}
			bad(key, "%s", msg)
		}
	}
	if c.Memory.Enabled && c.Memory.Path == "" {
		bad("memory.path", "is empty; name the SQLite file, such as \"memory.db\" (relative to KAIRO_HOME)")
	}
	if c.Memory.Recall < 0 || c.Memory.Recall > 50 {
		bad("memory.recall", "%d: give how many chunks a new task recalls, from 0 to 50", c.Memory.Recall)
	}
	if e := c.Memory.Embeddings; e.BaseURL != "" && e.Model == "" {
		bad("memory.embeddings.model", "is empty; name the embeddings model, such as \"text-embedding-3-small\"")
	}
	for _, name := range slices.Sorted(maps.Keys(c.MCP)) {
		m := c.MCP[name]
		key := "mcp." + name
		if len(name) > maxSkillName || !skillNameRE.MatchString(name) {
			bad(key, "%q is not a server name: use lower-case letters, digits, \"_\" and \"-\" (it prefixes the tools, mcp.%s.TOOL)", name, name)
		}
		if (len(m.Command) == 0) == (m.URL == "") && (m.Sandbox == nil || m.Sandbox.Manifest == "") {
			bad(key, "give command (a server on stdin and stdout) or url (streamable HTTP), one of the two")
		}
		for _, d := range []struct{ k, v string }{{"connect_timeout", m.ConnectTimeout}, {"shutdown_grace", m.ShutdownGrace}} {
			if d.v == "" {
				continue
			}
			if v, err := time.ParseDuration(d.v); err != nil || v <= 0 {
				bad(key+"."+d.k, "%q is not a positive duration; write it as \"10s\"", d.v)
			}
		}
		if m.MaxTools < 0 || m.MaxTools > 10000 {
			bad(key+".max_tools", "%d: want up to 10000 tools, or leave it out for 256", m.MaxTools)
		}
		if m.MaxResultBytes > 8<<20 {
			bad(key+".max_result_bytes", "%s: want up to 8MiB, or leave it out for 1MiB", m.MaxResultBytes)
		}
	}
	return errs
}

func (a *AgentConfig) validate() []*Error {
	var errs []*Error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if a.ID == "" || len(a.ID) > maxSkillName || !skillNameRE.MatchString(a.ID) {
		bad("agent.id", "%q is not an agent id: use lower-case letters, digits, \"_\" and \"-\", such as \"default\"", a.ID)
	}
	if a.Policy == "" || !skillNameRE.MatchString(a.Policy) {
		bad("agent.policy", "%q is not a plugin name; name the policy plugin, such as \"rules\"", a.Policy)
	}
	if !(a.Hz > 0 && a.Hz <= 10000) {
		bad("agent.hz", "%v: want a rate above 0 and at most 10000 ticks a second", a.Hz)
	}
	if !(a.MinHz > 0 && a.MinHz <= a.Hz) {
		bad("agent.min_hz", "%v: want a rate above 0 and at most agent.hz (%v)", a.MinHz, a.Hz)
	}
	if a.Overrun != "skip" && a.Overrun != "catch_up" {
		bad("agent.overrun", "%q: want \"skip\" (drop late ticks) or \"catch_up\" (run every late tick)", a.Overrun)
	}
	if d, err := time.ParseDuration(a.TickSpin); err != nil || d < 0 || d > time.Second {
		bad("agent.tick_spin", "%q: want a duration from \"0s\" (never spin) to \"1s\", such as \"2ms\"", a.TickSpin)
	}
	for i, f := range a.Grants.Folders {
		if !filepath.IsAbs(f) {
			bad(fmt.Sprintf("agent.grants.folders[%d]", i), "%q: give an absolute folder", f)
		}
	}
	switch a.BargeIn {
	case "boundary", "queue", "preempt":
	default:
		bad("agent.barge_in", "%q: want \"boundary\", \"queue\" or \"preempt\"", a.BargeIn)
	}
	if a.MaxIterations < 1 {
		bad("agent.max_iterations", "%d: a run loop needs at least 1 decision", a.MaxIterations)
	}
	if a.MaxToolCalls < 1 || a.MaxToolCalls > 1024 {
		bad("agent.max_tool_calls", "%d: want from 1 to 1024 tool calls a decision may run, such as 16", a.MaxToolCalls)
	}
	if a.QueryBackoff < 1 {
		bad("agent.query_backoff", "%d: want at least 1 unanswered query before the agent slows down", a.QueryBackoff)
	}
	return errs
}

// maxLLMRetries bounds llm.max_retries: with backoff doubling each time,
// more would keep a run loop waiting for minutes on an endpoint that is down.
const maxLLMRetries = 10

func (l *LLMConfig) validate() []*Error {
	var errs []*Error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if l.BaseURL != "" {
		u, err := url.Parse(l.BaseURL)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
			bad("llm.base_url", "%q is not an http(s) URL; give the API root of an OpenAI-compatible endpoint, such as \"https://api.openai.com/v1\" or \"http://localhost:11434/v1\"", l.BaseURL)
		case u.User != nil:
			bad("llm.base_url", "holds credentials; put the API key in the environment variable named by llm.api_key_env instead")
		}
		if l.Model == "" {
			bad("llm.model", "is empty; name the model to ask for, such as \"gpt-4o-mini\" or \"llama3.2\"")
		}
	}
	if l.APIKeyEnv != "" && !identRE.MatchString(l.APIKeyEnv) {
		bad("llm.api_key_env", "%q is not an environment variable name; give the NAME of the variable that holds the key, such as \"OPENAI_API_KEY\", never the key itself", l.APIKeyEnv)
	}
	if d, err := time.ParseDuration(l.Timeout); err != nil || d <= 0 {
		bad("llm.timeout", "%q is not a positive duration; write it as \"60s\", \"2m\"", l.Timeout)
	}
	if l.MaxRetries < 0 || l.MaxRetries > maxLLMRetries {
		bad("llm.max_retries", "%d is out of range; want 0 (no retry) to %d", l.MaxRetries, maxLLMRetries)
	}
	if l.MaxResponseBytes < 4<<10 || l.MaxResponseBytes > 1<<30 {
		bad("llm.max_response_bytes", "%s is out of range; give a size from 4KiB to 1GiB, such as \"4MiB\"", l.MaxResponseBytes)
	}
	return errs
}

func joinErrors(errs []*Error) error {
	if len(errs) == 0 {
		return nil
	}
	if len(errs) == 1 {
		return errs[0]
	}
	es := make([]error, len(errs))
	for i, e := range errs {
		es[i] = e
	}
	return errors.Join(es...)
}

// SlogLevel is the level as log/slog knows it.
func (l LogConfig) SlogLevel() (slog.Level, error) {
	switch strings.ToLower(l.Level) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("%q is not a log level; want \"debug\", \"info\", \"warn\" or \"error\"", l.Level)
}

// SocketPath is where the kernel listens for a daemon whose data folder is
// home: $KAIRO_SOCKET, else kernel.socket (relative to home), else
// home/kernel.sock.
func (c *Config) SocketPath(home string) string {
	if p := os.Getenv("KAIRO_SOCKET"); p != "" {
		return p
	}
	if c.Kernel.Socket != "" {
		return underHome(home, c.Kernel.Socket)
	}
	return filepath.Join(home, "kernel.sock")
}

// StorePath is the SQLite file for a daemon whose data folder is home.
func (c *Config) StorePath(home string) string { return underHome(home, c.Store.Path) }

// JetStreamPath is the embedded JetStream server's folder under home.
func (c *Config) JetStreamPath(home string) string {
	dir := c.Store.JetStream.Dir
	if dir == "" {
		dir = "jetstream"
	}
	return underHome(home, dir)
}

func underHome(home, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(home, p)
}
