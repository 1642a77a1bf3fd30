package layercheck

// module is the import path of Kairo's module.
const module = "github.com/kairo-os/kairo"

// floors are Kairo's packages from the bottom floor up, by path within the
// module; a path ending in "/..." holds its folder and what is under it,
// unless a longer entry names a package under it. A package imports only
// packages on floors below its own: what a lower floor needs from above is
// an interface it declares itself.
var floors = [][]string{
	// Below the leaves: the pipes the sandbox and the process manager
	// hand a child (they import nothing of Kairo).
	{"internal/pipes"},
	// Leaves: the wire vocabulary, the sandbox, the secrets and their
	// masking, and helpers of tests and builds, which import nothing of
	// Kairo but the pipes.
	{"abi", "abi/modelname", "sandbox", "sdk", "kernel/bench", "kernel/secrets", "internal/smalldisk", "internal/llmscript", "internal/testkit",
		"internal/wasmbuild", "internal/doccheck", "internal/layercheck", "host/internal/meter",
		"internal/mcp/internal/testserver", "kernel/bus/internal/hook", "internal/sqlitecache",
		"internal/testkit/observe"},
	// What speaks abi: the manifests, the guest and client SDKs, the
	// reader of audit records and the JSON views of events.
	{"manifests", "sdk/plugin", "sdk/client", "internal/audit", "internal/jsonview"},
	// The bus, and the plugins written against the guest SDK.
	{"kernel/bus", "plugins/echo", "plugins/llm", "plugins/rules", "plugins/terminal", "plugins/timer"},
	// The stores, each a driver of the bus; the plugins built as modules.
	{"kernel/bus/...", "plugins/*/wasm", "plugins"},
	// The egress proxy of the process trees.
	{"kernel/internal/..."},
	{"kernel/proc"},
	{"kernel"},
	// What runs on the kernel: its socket, the plugin runtime, and the
	// parts of the daemon that need no other part.
	{"kernel/ipc", "host/wasm", "internal/memory", "internal/llm",
		"internal/mcp", "internal/console", "internal/telemetry"},
	// The tools, and the history of a home as the kernel and the agent
	// write it and the plugins compiled ahead, for tests.
	{"internal/tools", "internal/testkit/history", "internal/testkit/wasmwarm"},
	{"internal/agent"},
	// The one composition root.
	{"host"},
	{"cmd/kairo", "cmd/kairo-sandbox", "internal/testkit/history/historygen", "internal/testkit/wasmwarm/wasmwarm"},
}

// forTests are the packages whose code only tests import: like test files,
// they may assemble what they test.
var forTests = []string{"kernel/bus/bustest", "internal/testkit", "internal/testkit/history", "internal/testkit/wasmwarm", "internal/testkit/wasmwarm/wasmwarm"}

// assemblers are the constructors that put a kernel together: a bus, a
// store, a kernel, its socket server, the plugin engine and its manager.
// Only package host calls them (besides tests, and the constructor's own
// package), keyed by package path within the module.
var assemblers = map[string][]string{
	"kernel":               {"New"},
	"kernel/bus":           {"New", "OpenStore"},
	"kernel/bus/sqlite":    {"Open"},
	"kernel/bus/jetstream": {"Open"},
	"kernel/ipc":           {"Listen"},
	"host/wasm":            {"NewEngine", "NewManager"},
}
