package wasm

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kairo-os/kairo/abi"
)

// Tool calls to plugins of kind tool: a call waits in the plugin's inbox,
// goes to the plugin in its next batch, and is answered by the ToolResult
// of the same ID in that batch's reply or a later one. A caller never
// waits for an instance that is gone: when the instance that holds a call
// stops — failed, reloaded, stopped — every call it holds fails at once.

// Tools lists the tools of every running tool plugin, sorted by plugin and
// tool name.
func (m *Manager) Tools() []abi.PluginTool {
	var out []abi.PluginTool
	for _, u := range m.all() {
		u.mu.Lock()
		if u.state == abi.PluginRunning && slices.Contains(u.info.Kinds, abi.KindTool) {
			for _, t := range u.info.Tools {
				out = append(out, abi.PluginTool{Plugin: u.name, Tool: t})
			}
		}
		u.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b abi.PluginTool) int {
		return cmp.Or(strings.Compare(a.Plugin, b.Plugin), strings.Compare(a.Name, b.Name))
	})
	return out
}

// CallTool runs call on the tool plugin named plugin and returns its
// result. It returns when the plugin answers, when the plugin's instance
// stops before it answers (an error that says so), or when ctx ends,
// whichever comes first: give ctx a deadline. A second call with the ID of
// a call still waiting is the same call (the ID is the actionId, the
// idempotency key): it waits for the same result.
func (m *Manager) CallTool(ctx context.Context, plugin string, call abi.ToolCall) (abi.ToolResult, error) {
	u, ok := m.unit(plugin)
	if !ok {
		return abi.ToolResult{}, fmt.Errorf("no plugin %q is installed; `kairo plugins` lists the plugins", plugin)
	}
	if call.ID == "" {
		return abi.ToolResult{}, fmt.Errorf("tool %s of plugin %s: the call has no ID; give it the actionId", call.Name, plugin)
	}
	w, err := u.queueTool(call)
	if err != nil {
		return abi.ToolResult{}, err
	}
	select {
	case <-w.done:
		return w.res, w.err
	case <-ctx.Done():
		u.dropToolWaiter(call.ID, w)
		return abi.ToolResult{}, fmt.Errorf("tool %s of plugin %s: no result: %w", call.Name, plugin, context.Cause(ctx))
	}
}

// toolWait is a tool call queued or handed to the plugin, and its result
// once done is closed.
type toolWait struct {
	done    chan struct{}
	res     abi.ToolResult
	err     error
	waiters int // callers waiting; the call is dropped when the last gives up
}

// queueTool puts call in u's inbox, or joins the waiting call of its ID.
func (u *unit) queueTool(call abi.ToolCall) (*toolWait, error) {
	u.mu.Lock()
	kinds, tools := u.info.Kinds, u.info.Tools
	u.mu.Unlock()
	if !slices.Contains(kinds, abi.KindTool) {
		return nil, fmt.Errorf("plugin %s is not a tool plugin (its kinds: %s)", u.name, strings.Join(kinds, ", "))
	}
	if !slices.ContainsFunc(tools, func(t abi.Tool) bool { return t.Name == call.Name }) {
		names := make([]string, len(tools))
		for i, t := range tools {
			names[i] = t.Name
		}
		return nil, fmt.Errorf("plugin %s has no tool %q; its tools are: %s", u.name, call.Name, strings.Join(names, ", "))
	}
	u.inMu.Lock()
	if !u.toolsOpen {
		u.inMu.Unlock()
		s := u.status()
		if s.State == abi.PluginRunning {
			s.State = "restarting" // its instance ended; the state follows
		}
		return nil, fmt.Errorf("tool plugin %s is not serving calls (%s%s); call again once `kairo plugins` shows it running", u.name, s.State, suffix(s.Error))
	}
	if w := u.toolWait[call.ID]; w != nil {
		w.waiters++
		u.inMu.Unlock()
		return w, nil
	}
	w := &toolWait{done: make(chan struct{}), waiters: 1}
	if u.toolWait == nil {
		u.toolWait = map[string]*toolWait{}
	}
	u.toolWait[call.ID] = w
	u.toolQueue = append(u.toolQueue, call)
	u.inMu.Unlock()
	u.signal()
	return w, nil
}

// dropToolWaiter lets a caller that gave up go; the last one to go drops
// the call, from the inbox if it is still there. A result that comes for
// it later is ignored.
func (u *unit) dropToolWaiter(id string, w *toolWait) {
	u.inMu.Lock()
	defer u.inMu.Unlock()
	if w.waiters--; w.waiters > 0 || u.toolWait[id] != w {
		return
	}
	delete(u.toolWait, id)
	u.toolQueue = slices.DeleteFunc(u.toolQueue, func(c abi.ToolCall) bool { return c.ID == id })
}

// answerTools resolves the calls the plugin answered.
func (u *unit) answerTools(results []abi.ToolResult) {
	u.inMu.Lock()
	defer u.inMu.Unlock()
	for _, r := range results {
		w := u.toolWait[r.ID]
		if w == nil {
			// Given up by its caller, or never asked.
			u.m.log.Debug("a tool result nobody waits for", "plugin", u.name, "id", r.ID)
			continue
		}
		delete(u.toolWait, r.ID)
		w.res = r
		close(w.done)
	}
}

// openTools starts taking tool calls for the instance about to serve.
func (u *unit) openTools() {
	u.inMu.Lock()
	u.toolsOpen = true
	u.inMu.Unlock()
}

// closeTools stops taking tool calls and fails those the instance holds:
// its serving ended with err (nil when the unit stopped).
func (u *unit) closeTools(err error) {
	msg := "it was stopped"
	if err != nil {
		msg = err.Error()
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		msg = "it failed: " + msg + "; the manager restarts it after a pause, call again then"
	}
	u.inMu.Lock()
	waits := u.toolWait
	u.toolsOpen, u.toolWait, u.toolQueue = false, nil, nil
	u.inMu.Unlock()
	for id, w := range waits {
		w.err = fmt.Errorf("tool plugin %s ended before it answered call %s: %s", u.name, id, msg)
		close(w.done)
	}
}
