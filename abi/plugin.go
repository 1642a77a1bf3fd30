package abi

import (
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// The plugin ABI: what a WebAssembly plugin exports, what the host gives it
// to import, and the MsgPack values that cross between them. README.md
// ("Plugins") describes it for authors of guests in any language.

// PluginABIVersion is the version of the plugin ABI. A guest's
// kairo_abi_version export must return it; the host refuses any other. It
// changes when an export, an import or a wire type below changes in a way an
// older peer cannot handle; adding an optional field does not change it.
const PluginABIVersion = 1

// The guest's exports, beside _initialize (which a WASI reactor, such as a
// Go -buildmode=c-shared module, exports and the host calls once first).
const (
	// ExportABIVersion: () -> i32, the [PluginABIVersion] the guest was built for.
	ExportABIVersion = "kairo_abi_version"
	// ExportInput: (size i32) -> i32, the address of a buffer of at least
	// size bytes that stays valid until the next call of any export. The
	// host writes the input of kairo_init or kairo_handle there.
	ExportInput = "kairo_input"
	// ExportInit: (len i32) -> i64. Reads [PluginConfig] (len bytes in the
	// input buffer) and returns [InitResult] as ptr<<32 | len.
	ExportInit = "kairo_init"
	// ExportHandle: (len i32) -> i64. Reads a [Batch] (len bytes in the input
	// buffer) and returns a [Reply] as ptr<<32 | len.
	ExportHandle = "kairo_handle"
	// ExportInitialize is the WASI reactor's start function.
	ExportInitialize = "_initialize"
)

// HostModule is the import module of the host functions.
const HostModule = "kairo"

// The host functions, module "kairo". Pointers and lengths are i32 offsets
// into the guest's memory; the host checks each against the memory and stops
// a guest that passes a range outside it.
const (
	// ImportCall: (method_ptr, method_len, args_ptr, args_len i32) -> i64.
	// Starts one kernel or host method by name with MsgPack args. Returns a
	// token > 0; the [CallResult] with that token arrives in a later [Batch].
	// Returns a negative [Errno] when the call cannot start.
	ImportCall = "call"
	// ImportPublish: (ptr, len i32) -> i32. Publishes one [Event] (MsgPack).
	// Returns 0, or a negative [Errno].
	ImportPublish = "publish"
	// ImportLog: (level i32, ptr, len i32). Logs a UTF-8 line at a
	// log/slog level (-4 debug, 0 info, 4 warn, 8 error).
	ImportLog = "log"
	// ImportNow: () -> i64. The time of the batch being handled, in Unix
	// nanoseconds: fixed for the whole call, so a run can be replayed.
	ImportNow = "now"
)

// Errno is what call and publish return when they refuse; a plugin SDK
// turns it into an error.
type Errno int32

// The [Errno] values.
const (
	ErrnoNotGranted Errno = -1 // the manifest does not grant the method or subject
	ErrnoInvalid    Errno = -2 // the value is not valid MsgPack of the expected type
	ErrnoBusy       Errno = -3 // too many calls or publishes in this batch
)

// Error says in words why the host refused, so that an [Errno] can be
// returned as the error it is.
func (e Errno) Error() string {
	switch e {
	case ErrnoNotGranted:
		return "not granted"
	case ErrnoInvalid:
		return "invalid value"
	case ErrnoBusy:
		return "too many calls or publishes in this batch"
	}
	return "unknown errno"
}

// Plugin kinds.
const (
	KindPolicy = "policy" // decides per tick
	KindTool   = "tool"   // provides tools and runs them
	KindInput  = "input"  // turns outside input into observations
)

// PluginConfig is the input of kairo_init: the config table of the plugin's
// manifest, narrowed by the operator.
type PluginConfig struct {
	Config map[string]any `msgpack:"config,omitempty"`
}

// InitResult is the output of kairo_init: the plugin's info, or the error
// that keeps it from starting.
type InitResult struct {
	Info  PluginInfo `msgpack:"info"`
	Error string     `msgpack:"error,omitempty"`
}

// PluginInfo describes a plugin to the host.
type PluginInfo struct {
	Name    string   `msgpack:"name"`
	Version string   `msgpack:"version,omitempty"`
	Kinds   []string `msgpack:"kinds,omitempty"`
	// Subscriptions are the subject patterns whose events the plugin wants
	// in its batches.
	Subscriptions []string `msgpack:"subscriptions,omitempty"`
	// Tools are the tools a tool plugin provides.
	Tools []Tool `msgpack:"tools,omitempty"`
	// Services are the methods the plugin serves to other plugins, each
	// named "NAME.method" after the plugin. Another plugin reaches one
	// through the call import, if its manifest grants the method; the
	// host delivers it as a ServiceCall.
	Services []string `msgpack:"services,omitempty"`
}

// Tool is a tool definition in the OpenAI function format.
type Tool struct {
	Name        string `msgpack:"name"`
	Description string `msgpack:"description,omitempty"`
	// Parameters is the JSON schema of the arguments, as a MsgPack map.
	Parameters map[string]any `msgpack:"parameters,omitempty"`
}

// Batch is the input of kairo_handle: what happened since the last batch.
type Batch struct {
	// Time is the time of the batch, also what the now import returns.
	Time time.Time `msgpack:"time"`
	// Tick counts the ticks of the runtime; 0 for a batch outside a tick.
	Tick        uint64       `msgpack:"tick,omitempty"`
	Events      []Event      `msgpack:"events,omitempty"`
	ToolCalls   []ToolCall   `msgpack:"toolCalls,omitempty"`
	CallResults []CallResult `msgpack:"callResults,omitempty"`
	// ServiceCalls are calls of the plugin's Services by other plugins.
	// The plugin answers each with a CallResult whose Token is the call's
	// ID, in Reply.ServiceResults of this reply or a later one.
	ServiceCalls []ServiceCall `msgpack:"serviceCalls,omitempty"`
	// Agent is set in the batches of a policy's ticks: what the agent
	// runtime composed for this tick beside the observations in Events.
	Agent *AgentInput `msgpack:"agent,omitempty"`
}

// ServiceCall is one call of a plugin's service by another plugin.
type ServiceCall struct {
	ID     int64              `msgpack:"id"`
	Method string             `msgpack:"method"`
	Args   msgpack.RawMessage `msgpack:"args,omitempty"`
	From   string             `msgpack:"from,omitempty"` // the calling plugin
}

// ToolCall asks a tool plugin to run one of its tools. The plugin answers
// with a [ToolResult] of the same ID, in this reply or a later one.
type ToolCall struct {
	// ID is the actionId, the idempotency key of the call.
	ID            string `msgpack:"id"`
	Name          string `msgpack:"name"`
	Arguments     string `msgpack:"arguments,omitempty"` // JSON, as in OpenAI's format
	CorrelationID string `msgpack:"correlationId,omitempty"`
}

// CallResult answers an earlier call import: Result on success, Error
// otherwise.
type CallResult struct {
	Token  int64              `msgpack:"token"`
	Result msgpack.RawMessage `msgpack:"result,omitempty"`
	Error  *Error             `msgpack:"error,omitempty"`
}

// Reply is the output of kairo_handle.
type Reply struct {
	// Thought is a policy's reasoning for this tick, if it says one.
	Thought     string       `msgpack:"thought,omitempty"`
	Actions     []Action     `msgpack:"actions,omitempty"`
	ToolResults []ToolResult `msgpack:"toolResults,omitempty"`
	// ServiceResults answer ServiceCalls: Token is the ServiceCall's ID.
	ServiceResults []CallResult `msgpack:"serviceResults,omitempty"`
	// Error reports a batch the plugin could not handle; the plugin keeps
	// running.
	Error string `msgpack:"error,omitempty"`
}

// [Action] types a policy may decide.
const (
	ActionNoop     = "noop"
	ActionSay      = "say"
	ActionQuery    = "query"
	ActionToolCall = "tool_call"
	ActionCancel   = "cancel"
)

// Action is one decision of a policy.
type Action struct {
	// ID is the actionId, the idempotency key of what the action starts.
	ID            string `msgpack:"id,omitempty"`
	Type          string `msgpack:"type"`
	CorrelationID string `msgpack:"correlationId,omitempty"`
	// CausationID is the event the action answers, when that was not in
	// this tick's batch (a policy that decided over several ticks, as one
	// waiting for a model does): a routed message's id opens or joins that
	// message's run loop.
	CausationID string             `msgpack:"causationId,omitempty"`
	Data        msgpack.RawMessage `msgpack:"data,omitempty"`
}

// ToolResult answers a [ToolCall].
type ToolResult struct {
	ID      string `msgpack:"id"`
	Content string `msgpack:"content"`
	IsError bool   `msgpack:"isError,omitempty"`
}

// PackPtrLen packs the result of kairo_init and kairo_handle.
func PackPtrLen(ptr, n uint32) uint64 { return uint64(ptr)<<32 | uint64(n) }

// UnpackPtrLen splits what [PackPtrLen] packed.
func UnpackPtrLen(v uint64) (ptr, n uint32) { return uint32(v >> 32), uint32(v) }
