package abi

import "time"

// Parameters and results of the kernel methods, shared by the kernel, the
// IPC client and plugins.

// PingResult answers kernel.ping.
type PingResult struct {
	Time time.Time `msgpack:"time"`
	// Ready is set once the daemon is up: its plugins, tools, memory and
	// agent started (host.Daemon.Start returned), not only its socket. It
	// is cleared when the daemon begins to stop. A kernel no host runs is
	// ready once its owner says so (kernel.Kernel.SetReady).
	Ready bool `msgpack:"ready"`
}

// IntrospectResult answers kernel.introspect.
type IntrospectResult struct {
	ABIVersion int      `msgpack:"abiVersion"`
	Version    string   `msgpack:"version"`
	Methods    []string `msgpack:"methods"`
	// Host is the kernel's name among the hosts that share its store;
	// empty when the store is its alone.
	Host string `msgpack:"host,omitempty"`
}

// MaxHeapProfile bounds the profile debug.heap answers: a heap profile is
// tens of KiB, so one past this is refused rather than sent in a frame
// near [DefaultMaxFrame].
const MaxHeapProfile = 8 << 20

// DebugHeapParams are debug.heap's params ([MethodDebugHeap]).
type DebugHeapParams struct {
	// GC runs a garbage collection first, so the profile's in-use figures
	// are the live heap's, not what the last cycle left.
	GC bool `msgpack:"gc,omitempty"`
}

// DebugHeapResult answers debug.heap: the daemon's heap profile, in the
// gzipped protocol buffer form go tool pprof reads, with the heap in use as
// system.get_metrics reports it ([Metrics].HeapBytes) when it was taken.
type DebugHeapResult struct {
	Profile   []byte    `msgpack:"profile"`
	HeapBytes uint64    `msgpack:"heapBytes"`
	Time      time.Time `msgpack:"time"`
}

// Metrics answers system.get_metrics.
type Metrics struct {
	Uptime        time.Duration `msgpack:"uptime"`
	Goroutines    int           `msgpack:"goroutines"`
	HeapBytes     uint64        `msgpack:"heapBytes"`
	Connections   int           `msgpack:"connections"`
	Subscriptions int           `msgpack:"subscriptions"`
	LastSeq       uint64        `msgpack:"lastSeq"`
	Published     uint64        `msgpack:"published"`
	Duplicates    uint64        `msgpack:"duplicates"`
	Delivered     uint64        `msgpack:"delivered"`
	CatchUps      uint64        `msgpack:"catchUps"`
	Requests      uint64        `msgpack:"requests"`
	BadFrames     uint64        `msgpack:"badFrames"`
	Store         string        `msgpack:"store"`
	// StoreFullSince is set while the store's disk is full and events are
	// refused; StoreRefused counts them.
	StoreFullSince time.Time `msgpack:"storeFullSince,omitempty"`
	StoreRefused   uint64    `msgpack:"storeRefused,omitempty"`
	// StoreUnreachableSince is set while the store (a NATS cluster) cannot
	// be reached and events are refused; StoreUnreachableRefused counts
	// them.
	StoreUnreachableSince   time.Time `msgpack:"storeUnreachableSince,omitempty"`
	StoreUnreachableRefused uint64    `msgpack:"storeUnreachableRefused,omitempty"`
}

// PublishParams is events.publish. The kernel fills an empty ID, Time and
// Source; Seq is ignored. An ID the publisher chose is stored in its
// scope, "SOURCE:ID" (the answer's ID): no publisher can take an id the
// kernel derives, or another publisher's. Publishing the same ID again,
// chosen or answered, is a duplicate.
type PublishParams struct {
	Event Event `msgpack:"event"`
}

// PublishResult is returned once the event is durable.
type PublishResult struct {
	// ID is the event's id as stored: the bus's own when the publisher
	// left it empty, else the publisher's in its scope.
	ID        string `msgpack:"id"`
	Seq       uint64 `msgpack:"seq"`
	Duplicate bool   `msgpack:"duplicate,omitempty"` // the ID was already stored at Seq
}

// SubscribeParams is events.subscribe. Pattern is a subject pattern; empty
// means every subject (">"). FromSeq 0 means from now; otherwise delivery starts at that
// sequence number, replaying what is stored, then continues live.
type SubscribeParams struct {
	Pattern string `msgpack:"pattern,omitempty"`
	FromSeq uint64 `msgpack:"fromSeq,omitempty"`
}

// SubscribeResult names the subscription that EVENT packets will carry: the
// ID of the subscribe request, so the client can route events that arrive
// before this result.
type SubscribeResult struct {
	Subscription uint64 `msgpack:"sub"`
}

// UnsubscribeParams is events.unsubscribe.
type UnsubscribeParams struct {
	Subscription uint64 `msgpack:"sub"`
}

// ReplayParams is events.replay: the stored events in [FromSeq, ToSeq] and
// [Since, Until] matching Pattern, in sequence order, pushed as EVENT packets
// whose Subscription is the request ID, then answered with a [ReplayResult].
// Zero values leave a bound open; Limit 0 means no limit.
type ReplayParams struct {
	Pattern string    `msgpack:"pattern,omitempty"`
	FromSeq uint64    `msgpack:"fromSeq,omitempty"`
	ToSeq   uint64    `msgpack:"toSeq,omitempty"`
	Since   time.Time `msgpack:"since,omitempty"`
	Until   time.Time `msgpack:"until,omitempty"`
	Limit   int       `msgpack:"limit,omitempty"`
}

// ReplayResult ends a replay.
type ReplayResult struct {
	Count   int    `msgpack:"count"`
	LastSeq uint64 `msgpack:"lastSeq"` // last sequence number delivered, 0 if none
}

// ProcessInfo is a process session as process.status and process.spawn
// report it. It is kept after the process exits.
type ProcessInfo struct {
	ID            string    `msgpack:"id"`
	PID           int       `msgpack:"pid"`
	Argv          []string  `msgpack:"argv"`
	Cwd           string    `msgpack:"cwd,omitempty"`
	PTY           bool      `msgpack:"pty,omitempty"`
	StartedAt     time.Time `msgpack:"startedAt"`
	ExitedAt      time.Time `msgpack:"exitedAt,omitempty"`
	ExitCode      *int      `msgpack:"exitCode,omitempty"` // set once exited normally
	Signal        string    `msgpack:"signal,omitempty"`   // the signal that ended it, e.g. "SIGKILL"
	Status        string    `msgpack:"status"`             // "running", "exited" or "killed" (ended by any signal)
	CorrelationID string    `msgpack:"correlationId,omitempty"`
	CausationID   string    `msgpack:"causationId,omitempty"`
	// LastLines and Lines are set in process.attach's answer once the
	// process has ended: what it wrote last, as its exit event carries
	// them ([ProcessExitedEvent]).
	LastLines []OutputLine `msgpack:"lastLines,omitempty"`
	Lines     int          `msgpack:"lines,omitempty"`
}

// Process status values.
const (
	ProcessRunning = "running"
	ProcessExited  = "exited"
	ProcessKilled  = "killed"
)

// SpawnParams is process.spawn. Output comes to the caller as STREAM_CHUNK
// packets; Env nil means the kernel's environment.
type SpawnParams struct {
	Argv              StringList `msgpack:"argv"`
	Cwd               string     `msgpack:"cwd,omitempty"`
	Env               StringList `msgpack:"env,omitempty"` // "KEY=value"
	PTY               bool       `msgpack:"pty,omitempty"`
	Cols              uint16     `msgpack:"cols,omitempty"`
	Rows              uint16     `msgpack:"rows,omitempty"`
	Mode              string     `msgpack:"mode,omitempty"` // "chunk" (default) or "line"
	MaxChunkBytes     int        `msgpack:"maxChunkBytes,omitempty"`
	MaxBytesPerSecond int64      `msgpack:"maxBytesPerSecond,omitempty"`
	// Encoding of the output chunks: "auto" (the default) labels each
	// chunk "utf8" when it is valid UTF-8 and "binary" otherwise;
	// "binary" labels every chunk "binary" without looking at it, which
	// lets the kernel move bulk output from the pipe to the socket
	// without copying it.
	Encoding      string `msgpack:"encoding,omitempty"`
	CorrelationID string `msgpack:"correlationId,omitempty"`
	CausationID   string `msgpack:"causationId,omitempty"`
	// Manifest runs a binary skill: the path of its skill.toml, whose
	// command, grants and limits apply. Params fill the command's
	// {placeholders}; Argv, when given, is appended to the command.
	Manifest string `msgpack:"manifest,omitempty"`
	// Skill runs an installed skill by name, from the kernel's skills
	// folder: the only way a skill, plugin or the agent runs one (only the
	// operator names a manifest file).
	Skill  string    `msgpack:"skill,omitempty"`
	Params StringMap `msgpack:"params,omitempty"`
	// Approval names an approved on-deny approval of this skill: the run
	// holds the approval's grants besides the manifest's. An approval's
	// grants are spent by one spawn.
	Approval string `msgpack:"approval,omitempty"`
}

// ProcessRef names a process: process.status, .kill, .pause, .resume,
// .attach. process.status without an ID lists the processes of the
// caller's user (all of them for root).
type ProcessRef struct {
	ProcessID string `msgpack:"processId"`
}

// StdinParams is process.stdin.write: Data (with Encoding "utf8", the
// default, or "base64" for text that carries bytes), then, with Close, end
// of input.
type StdinParams struct {
	ProcessID string `msgpack:"processId"`
	Data      []byte `msgpack:"data,omitempty"`
	Encoding  string `msgpack:"encoding,omitempty"`
	Close     bool   `msgpack:"close,omitempty"`
}

// WaitParams is process.wait. Timeout 0 waits as long as the call lives.
type WaitParams struct {
	ProcessID string        `msgpack:"processId"`
	Timeout   time.Duration `msgpack:"timeout,omitempty"`
}

// WaitResult answers process.wait; TimedOut when the process still runs.
type WaitResult struct {
	Process  ProcessInfo `msgpack:"process"`
	TimedOut bool        `msgpack:"timedOut,omitempty"`
}

// SignalParams is process.signal: a name ("TERM", "SIGINT") or a number.
type SignalParams struct {
	ProcessID string `msgpack:"processId"`
	Signal    string `msgpack:"signal"`
}

// ResizeParams is process.resize, for a process on a PTY.
type ResizeParams struct {
	ProcessID string `msgpack:"processId"`
	Cols      uint16 `msgpack:"cols"`
	Rows      uint16 `msgpack:"rows"`
}

// ConsoleURLResult is console.url: the address of the console's page
// with its token, which the operator opens in a browser (`kairo console`).
type ConsoleURLResult struct {
	URL string `msgpack:"url"`
}

// CancelParams is intent.cancel: end every process of the run loop.
type CancelParams struct {
	CorrelationID string `msgpack:"correlationId"`
	Reason        string `msgpack:"reason,omitempty"`
}

// CancelResult lists the processes intent.cancel ended.
type CancelResult struct {
	ProcessIDs []string `msgpack:"processIds"`
}

// Device is one entry of device.list.
type Device struct {
	Path  string `msgpack:"path"`
	Class string `msgpack:"class"` // "gpu", "video", "audio", "serial", "input", "kvm"
	// Access is what the kernel's own user may do with it: "rw", "r", "w"
	// or "" (present but not accessible).
	Access string `msgpack:"access"`
}

// PluginStatus is one plugin as plugins.list reports it.
type PluginStatus struct {
	Name    string    `msgpack:"name"`
	Version string    `msgpack:"version,omitempty"`
	Kinds   []string  `msgpack:"kinds,omitempty"`
	File    string    `msgpack:"file"`              // the .wasm
	Builtin bool      `msgpack:"builtin,omitempty"` // compiled into kairo, or from the folder beside the binary
	Native  bool      `msgpack:"native,omitempty"`  // compiled into kairo: no module, File empty
	Trusted bool      `msgpack:"trusted,omitempty"` // runs without a deadline
	State   string    `msgpack:"state"`             // one of the Plugin* states
	Error   string    `msgpack:"error,omitempty"`   // why it is failed, stopped or refused
	Since   time.Time `msgpack:"since"`             // when it entered State
	// Failures counts the failures in the current window; Restarts the
	// times it was started again after one.
	Failures int `msgpack:"failures"`
	Restarts int `msgpack:"restarts"`
	Denied   int `msgpack:"denied,omitempty"` // calls and publishes refused as not granted
	// Grants, as the operator narrowed them.
	Subscribe []string `msgpack:"subscribe,omitempty"`
	Publish   []string `msgpack:"publish,omitempty"`
	Call      []string `msgpack:"call,omitempty"`
	WASIFS    []string `msgpack:"wasiFs,omitempty"`
	WASIEnv   []string `msgpack:"wasiEnv,omitempty"`
	Services  []string `msgpack:"services,omitempty"`
	Tools     []string `msgpack:"tools,omitempty"`
	// Requested is what the plugin's manifest asks beyond its grants: a
	// drop-in gets it only once the operator grants it (plugins.grant).
	Requested *PluginGrant `msgpack:"requested,omitempty"`
	// Capped says which of the manifest's limits the host's ceilings
	// lowered ("memory 4GiB capped to 256MiB").
	Capped []string `msgpack:"capped,omitempty"`
}

// PluginGrant is what the operator grants a plugin beyond its baseline, or
// takes back: the params of plugins.grant and plugins.revoke, and the data
// of kairo.plugin.granted and kairo.plugin.revoked, which the host folds
// into each plugin's grants when it starts.
type PluginGrant struct {
	Plugin    string   `msgpack:"plugin"`
	Call      []string `msgpack:"call,omitempty"`
	Publish   []string `msgpack:"publish,omitempty"`
	Subscribe []string `msgpack:"subscribe,omitempty"`
	WASIFS    []string `msgpack:"wasiFs,omitempty"`
	WASIEnv   []string `msgpack:"wasiEnv,omitempty"`
	// By is who asked, "operator/UID", set by the host in the events.
	By string `msgpack:"by,omitempty"`
}

// Plugin states.
const (
	PluginStarting = "starting" // loading and initializing
	PluginRunning  = "running"
	PluginBackoff  = "backoff"  // failed; restarts after a pause
	PluginStopped  = "stopped"  // failed too often in the window; stays stopped until changed or restarted
	PluginRefused  = "refused"  // its manifest or module cannot run here; fixed by changing the files
	PluginDisabled = "disabled" // turned off in kairo.toml
)

// PluginsListResult answers plugins.list.
type PluginsListResult struct {
	Plugins []PluginStatus `msgpack:"plugins"`
}

// PluginRef names a plugin: plugins.restart.
type PluginRef struct {
	Name string `msgpack:"name"`
}

// PluginFailed is the data of kairo.plugin.failed: an instance was stopped.
// RestartIn is 0 when it stays stopped.
type PluginFailed struct {
	Plugin    string        `msgpack:"plugin"`
	Op        string        `msgpack:"op"`
	Reason    string        `msgpack:"reason"`
	Error     string        `msgpack:"error"`
	Stderr    string        `msgpack:"stderr,omitempty"`
	Failures  int           `msgpack:"failures"`
	RestartIn time.Duration `msgpack:"restartIn,omitempty"`
}

// PluginDenied is the data of kairo.plugin.denied: the calls, publishes
// and subscriptions the plugin's grants refused in one batch (or its init),
// reported once for the batch.
type PluginDenied struct {
	Plugin string `msgpack:"plugin"`
	Import string `msgpack:"import"` // of the first refused: "call", "publish" or "subscribe"
	Target string `msgpack:"target"` // the method or the subject of the first refused
	// Count is how many were refused in the batch; Targets the first few
	// distinct ones, as "IMPORT TARGET".
	Count   int      `msgpack:"count"`
	Targets []string `msgpack:"targets,omitempty"`
}

// PluginState is the data of kairo.plugin.started, .stopped and .unloaded.
type PluginState struct {
	Plugin  string `msgpack:"plugin"`
	Version string `msgpack:"version,omitempty"`
	File    string `msgpack:"file,omitempty"`
	Reason  string `msgpack:"reason,omitempty"`
}
