// Package mcp imports the tools of MCP servers into Kairo, through the
// official MCP Go SDK. A server is a command that speaks MCP on its stdin and
// stdout, or a streamable HTTP endpoint.
//
// A stdio server is a kernel process like any other: spawned through the
// kernel's process manager (so sandboxed when its config gives grants, in a
// process group of its own, its spawn and exit on the bus), and the SDK
// talks to it over that process's stdin and stdout. Its stderr is kept,
// the end of it, to explain a failure. Stopping it follows MCP's stdio
// shutdown and then makes sure: stdin closed, SIGTERM, SIGKILL of the
// whole process group; a server is never left running when its Server is
// closed or replaced.
package mcp
