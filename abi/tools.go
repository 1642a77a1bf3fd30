package abi

// The tool registry's values: what tools.list reports and what stands in a
// tool result too large to carry in its kairo.tool.result event.

// [Tool] sources: where a tool of the registry comes from.
const (
	ToolSourceKernel = "kernel" // the kernel's process methods
	ToolSourceSkill  = "skill"  // a binary skill's manifest
	ToolSourcePlugin = "plugin" // a wasm plugin of kind tool
	ToolSourceMCP    = "mcp"    // a tool of an MCP server
)

// ToolInfo is one tool as tools.list reports it: its OpenAI-format
// definition, where it comes from and what it may touch.
type ToolInfo struct {
	Tool
	Source string `msgpack:"source"` // one of the ToolSource* values
	// Origin names the thing behind the tool: a skill.toml, a plugin, an
	// MCP server; empty for the kernel's tools.
	Origin string `msgpack:"origin,omitempty"`
	// Grants say, one item each, what the tool may reach: a sandbox's
	// filesystem and network grants, a plugin's methods and subjects.
	Grants []string `msgpack:"grants,omitempty"`
	// Error says why the tool is listed but cannot be called, such as a
	// name another tool already has.
	Error string `msgpack:"error,omitempty"`
}

// ToolsListResult answers tools.list, sorted by name.
type ToolsListResult struct {
	Tools []ToolInfo `msgpack:"tools"`
}

// ToolResultRef is the Result of a kairo.tool.result whose output was too
// large to carry: the output is stored once, outside the event log, and
// the event carries this reference. tools.result (and the agent's tool
// result.read) reads it back.
type ToolResultRef struct {
	Ref     string `msgpack:"ref"`     // "sha256:HEX" of the output
	Size    int64  `msgpack:"size"`    // its length in bytes
	Preview string `msgpack:"preview"` // its first bytes, cut at a UTF-8 boundary
}

// ToolResultParams is tools.result: up to Limit bytes (0: 64 KiB) of the
// stored output Ref from Offset on.
type ToolResultParams struct {
	Ref    string `msgpack:"ref"`
	Offset int64  `msgpack:"offset,omitempty"`
	Limit  int    `msgpack:"limit,omitempty"`
}

// ToolResultData answers tools.result.
type ToolResultData struct {
	Ref    string `msgpack:"ref"`
	Size   int64  `msgpack:"size"`
	Offset int64  `msgpack:"offset"`
	Data   []byte `msgpack:"data"`
	EOF    bool   `msgpack:"eof,omitempty"` // Data reaches the end
}
