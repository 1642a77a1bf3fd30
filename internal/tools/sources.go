package tools

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/kairo-os/kairo/abi"
)

// Source is a set of tools served from outside Kairo's own components,
// such as an MCP server; the MCP client's server satisfies it through a
// small adapter. Its tools are named mcp.SERVER.TOOL in the registry.
type Source interface {
	// Tools are the source's tools as they are now.
	Tools() []abi.Tool
	// Call runs the tool with its JSON arguments and returns what it
	// answered, an error result when isError, or err when the call could
	// not be made at all (the server is gone). It returns when ctx ends.
	Call(ctx context.Context, tool, args string) (content string, isError bool, err error)
}

// source is a registered Source.
type source struct {
	name   string
	src    Source
	origin string
	grants []string
}

// AddSource registers the tools of the MCP server name, now and as they
// change, as mcp.NAME.TOOL. origin says where the server runs (its
// command line or URL) and grants what its sandbox lets it reach, for
// tools.list. A name already registered is an error.
func (r *Registry) AddSource(name string, src Source, origin string, grants []string) error {
	if !sourceNameRE.MatchString(name) {
		return fmt.Errorf("tools: MCP server name %q: use lower-case letters, digits, _ and -, starting with a letter or a digit; its tools are named mcp.NAME.TOOL", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.sources[name]; ok {
		return fmt.Errorf("tools: an MCP server named %s is already registered (%s); give each server its own name", name, s.origin)
	}
	prefix := mcpPrefix + name + "."
	for n, e := range r.tools {
		if strings.HasPrefix(n, prefix) {
			return fmt.Errorf("tools: MCP server %s: its tools would share the names of %s (%s); give the server another name", name, n, describeOrigin(e.info))
		}
	}
	r.sources[name] = &source{name: name, src: src, origin: origin, grants: grants}
	return nil
}

// RemoveSource unregisters the MCP server name.
func (r *Registry) RemoveSource(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.sources, name)
}

// list is the source's tools as the registry names them; a tool whose
// name the server gives twice is listed again with the collision.
func (s *source) list() []abi.ToolInfo {
	tools := s.src.Tools()
	out := make([]abi.ToolInfo, 0, len(tools))
	seen := make(map[string]bool, len(tools))
	for _, t := range tools {
		info := abi.ToolInfo{Tool: t, Source: abi.ToolSourceMCP, Origin: s.origin, Grants: s.grants}
		info.Name = mcpPrefix + s.name + "." + t.Name
		if seen[t.Name] {
			info.Error = fmt.Sprintf("MCP server %s lists a second tool %s; the first is the one called", s.name, t.Name)
		}
		seen[t.Name] = true
		out = append(out, info)
	}
	return out
}

// callSource runs c on its MCP server. The call runs on a goroutine of its
// own, so a server that does not heed ctx still cannot hold the caller
// past the timeout; the goroutine ends when the server answers.
func (r *Registry) callSource(ctx context.Context, c *Invocation) abi.ToolResultEvent {
	server, tool, _ := strings.Cut(strings.TrimPrefix(c.Tool, mcpPrefix), ".")
	r.mu.RLock()
	s := r.sources[server]
	r.mu.RUnlock()
	if s == nil || tool == "" {
		return abi.ToolResultEvent{Error: r.unknown(c.Tool)}
	}
	type answer struct {
		content string
		isError bool
		err     error
	}
	done := make(chan answer, 1)
	r.wg.Add(1)
	go func() { // owned by the registry; Close waits for it
		defer r.wg.Done()
		var a answer
		defer func() {
			if p := recover(); p != nil {
				r.log.Error("an MCP tool call panicked", "tool", c.Tool, "panic", p, "stack", string(debug.Stack()))
				a = answer{err: fmt.Errorf("it panicked: %v", p)}
			}
			done <- a
		}()
		a.content, a.isError, a.err = s.src.Call(ctx, tool, c.Args)
	}()
	select {
	case a := <-done:
		if a.err != nil {
			return errorResult("%s: MCP server %s: %v", c.Tool, server, a.err)
		}
		return r.content(a.content, a.isError)
	case <-ctx.Done():
		return errorResult("%s: MCP server %s: %v", c.Tool, server, context.Cause(ctx))
	}
}
