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
	// Agents are the agents beside [agent], [agents.ID]: each its own
	// principal, with its own grants, run loops and memory.
	Agents map[string]AgentConfig `toml:"agents"`
	// Router routes user messages to the agents and bounds delegation.
	Router  RouterConfig  `toml:"router"`
	Memory  MemoryConfig  `toml:"memory"`
	Console ConsoleConfig `toml:"console"`
	// Approval says which tools need a person's yes ([approval]).
	Approval ApprovalConfig `toml:"approval"`
	// Plugins are the operator's word on each plugin, [plugins.NAME]: it
	// may turn one off, trust it, narrow its grants, change its limits.
	Plugins map[string]PluginOverride `toml:"plugins"`
	// MCP are the MCP servers whose tools the agent gets, [mcp.NAME].
	MCP map[string]MCPServer `toml:"mcp"`
	// Secrets is the operator's secret store ([secrets]).
	Secrets SecretsConfig `toml:"secrets"`
	// Telemetry exports traces and serves metrics ([telemetry]).
	Telemetry TelemetryConfig `toml:"telemetry"`
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
	// Secrets are the operator's secrets the server gets when it starts,
	// as a skill's manifest names them.
	Secrets SecretGrants `toml:"secrets"`
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
	return validateListen("console.listen", "console", c.Listen, c.AllowRemote, "8765")
}

// validateListen checks an address a server of the daemon listens on: ""
// (off), or HOST:PORT with an IP address, loopback unless allowRemote.
// table names the table whose allow_remote key says otherwise, and port
// is the port the examples in the errors show.
func validateListen(key, table, listen string, allowRemote bool, example string) []*Error {
	if listen == "" {
		return nil
	}
	bad := func(format string, args ...any) []*Error {
		return []*Error{{Key: key, Msg: fmt.Sprintf(format, args...)}}
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return bad("%q is not an address; write HOST:PORT, such as \"127.0.0.1:%s\" (or \"\" to turn it off)", listen, example)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return bad("%q: the port %q is not a number from 0 to 65535; write HOST:PORT, such as \"127.0.0.1:%s\"", listen, port, example)
	}
	if host == "" {
		return bad("%q names no host; write \"127.0.0.1:%s\" (or \"0.0.0.0:%s\" with [%s] allow_remote = true, for every address)", listen, port, port, table)
	}
	if host != "localhost" {
		if _, err := netip.ParseAddr(host); err != nil {
			return bad("%q: the host %q is not an IP address; write an address, such as \"127.0.0.1:%s\" (a name would be looked up, and could change)", listen, host, example)
		}
	}
	if !Loopback(listen) && !allowRemote {
		return bad("%q is not a loopback address: it would be reachable from other machines; listen on \"127.0.0.1:%s\", or set [%s] allow_remote = true to mean it", listen, port, table)
	}
	return nil
}

// Values of [sandbox] audit.
const (
	SandboxAuditAuto = "auto"
	SandboxAuditOff  = "off"
)

// The bounds of the sandbox uid range: above the 16-bit uids that
// accounts, nobody (65534) and older tools use, below (uid_t)-1.
const (
	MinSandboxUID = 65536
	MaxSandboxUID = 1<<32 - 2
)

// passwdFiles are the account and group databases the uid range is
// checked against (tests point them elsewhere).
var passwdFiles = [2]string{"/etc/passwd", "/etc/group"}

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
	md, err := decode(path, text, &c)
	if err != nil {
		return c, err
	}
	c.fillAgents(md)
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
	errs = append(errs, c.Agent.validate("agent")...)
	errs = append(errs, c.validateAgents()...)
	errs = append(errs, c.Console.validate()...)
	errs = append(errs, c.Telemetry.validate()...)
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
		for _, p := range m.Secrets.check(m.otherVars()) {
			bad(key+".secrets."+keyString(p.key), "%s", p.msg)
		}
	}
	return append(errs, c.Secrets.validate()...)
}

// otherVars are the variables the server's table sets or passes besides
// its secrets, each with the key that does.
func (m MCPServer) otherVars() map[string]string {
	others := map[string]string{}
	for _, v := range m.EnvPass {
		others[v] = "env_pass"
	}
	for v := range m.Env {
		others[v] = "env"
	}
	if m.Sandbox != nil {
		for _, v := range m.Sandbox.Env.Pass {
			others[v] = "sandbox.env.pass"
		}
		for v := range m.Sandbox.Env.Set {
			others[v] = "sandbox.env.set"
		}
	}
	return others
}

// maxLLMRetries bounds llm.max_retries: with backoff doubling each time,
// more would keep a run loop waiting for minutes on an endpoint that is down.
const maxLLMRetries = 10

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

func underHome(home, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(home, p)
}
