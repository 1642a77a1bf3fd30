package tools

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kairo-os/kairo/abi"
)

// Wasm tool plugins: each tool a running plugin of kind tool declares is
// PLUGIN.TOOL, called through the plugin engine. Plugins come and go while
// the registry runs, so their tools are looked up at each call, not
// registered.

// pluginTools lists the running tool plugins' tools; one whose name is in
// taken is listed with the collision.
func (r *Registry) pluginTools(taken []abi.ToolInfo) []abi.ToolInfo {
	m := r.cfg.Plugins
	if m == nil {
		return nil
	}
	tools := m.Tools()
	if len(tools) == 0 {
		return nil
	}
	grants := map[string][]string{}
	files := map[string]string{}
	for _, p := range m.List() {
		grants[p.Name], files[p.Name] = pluginGrants(p), p.File
	}
	out := make([]abi.ToolInfo, 0, len(tools))
	for _, t := range tools {
		info := abi.ToolInfo{Tool: t.Tool, Source: abi.ToolSourcePlugin, Origin: files[t.Plugin], Grants: grants[t.Plugin]}
		info.Name = t.Plugin + "." + t.Name
		if i := slices.IndexFunc(taken, func(o abi.ToolInfo) bool { return o.Name == info.Name }); i >= 0 {
			info.Error = fmt.Sprintf("%s is already a tool (%s), which is the one called; rename plugin %s or its tool", info.Name, describeOrigin(taken[i]), t.Plugin)
		} else if strings.HasPrefix(info.Name, mcpPrefix) {
			info.Error = fmt.Sprintf("the names mcp.* are the MCP servers' tools; rename plugin %s", t.Plugin)
		}
		out = append(out, info)
	}
	return out
}

// pluginGrants says what a plugin's manifest grants, as narrowed by the
// operator.
func pluginGrants(p abi.PluginStatus) []string {
	var out []string
	for _, g := range []struct {
		key string
		v   []string
	}{{"call", p.Call}, {"publish", p.Publish}, {"subscribe", p.Subscribe}, {"wasi.fs", p.WASIFS}, {"wasi.env", p.WASIEnv}} {
		if len(g.v) > 0 {
			out = append(out, g.key+" "+strings.Join(g.v, ", "))
		}
	}
	if p.Trusted {
		out = append(out, "trusted: no deadline")
	}
	return out
}

// callPlugin runs c on the plugin its name starts with.
func (r *Registry) callPlugin(ctx context.Context, c *Invocation) abi.ToolResultEvent {
	plugin, tool, _ := strings.Cut(c.Tool, ".")
	res, err := r.cfg.Plugins.CallTool(ctx, plugin, abi.ToolCall{ID: c.ActionID, Name: tool, Arguments: c.Args, CorrelationID: c.CorrelationID})
	if err != nil {
		// A plugin that stopped still names its tools in the list.
		known := slices.ContainsFunc(r.cfg.Plugins.List(), func(p abi.PluginStatus) bool {
			return p.Name == plugin && slices.Contains(p.Tools, tool)
		})
		if !known {
			return abi.ToolResultEvent{Error: r.unknown(c.Tool)}
		}
		return abi.ToolResultEvent{Error: err.Error()}
	}
	return r.content(res.Content, res.IsError)
}
