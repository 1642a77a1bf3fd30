package abi

// SystemLifecycle is the data of kairo.system.started and
// kairo.system.stopping ([SubjectSystemStarted], [SubjectSystemStopping]):
// which daemon started or is stopping.
type SystemLifecycle struct {
	Version string `msgpack:"version"`
	PID     int    `msgpack:"pid"`
}

// MCPServerState is the data of kairo.mcp.connected and kairo.mcp.failed
// ([SubjectMCPConnected], [SubjectMCPFailed]): a server of the daemon, the
// tools it offers once connected, or why it failed.
type MCPServerState struct {
	Server string   `msgpack:"server"`
	Tools  []string `msgpack:"tools,omitempty"`
	Error  string   `msgpack:"error,omitempty"`
}
