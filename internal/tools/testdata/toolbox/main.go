// Command toolbox is a tool plugin built with the SDK for the registry's
// tests and benchmark. Its tools: echo (answers its arguments), fail (an
// error result), crash (panics, which stops the plugin), loop (loops until
// the host stops it at its deadline), big {"bytes": N}
// (answers N bytes of text), and sleep {"ms": N}, which answers after N ms
// of real time in a later batch: it spawns `sleep` through the kernel and
// answers once process.wait has returned (a guest's own clock is not the
// wall clock). The config's "name" names it, so one module serves under
// two names, and "echo_as" gives its echo tool another name.
package main

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/plugin"
)

func init() {
	plugin.Register(plugin.Plugin{Init: setup, Handle: handle, Tools: []plugin.Tool{
		{Tool: abi.Tool{Name: "echo", Description: "answers its arguments", Parameters: object(nil)}, Run: func(c *abi.ToolCall) (string, error) {
			return c.Arguments, nil
		}},
		{Tool: abi.Tool{Name: "fail", Description: "fails", Parameters: object(nil)}, Run: func(*abi.ToolCall) (string, error) {
			return "", errors.New("asked to fail")
		}},
		{Tool: abi.Tool{Name: "crash", Description: "panics", Parameters: object(nil)}, Run: func(*abi.ToolCall) (string, error) {
			panic("asked to crash")
		}},
		{Tool: abi.Tool{Name: "loop", Description: "never answers", Parameters: object(nil)}, Run: func(*abi.ToolCall) (string, error) {
			for {
				spins++
			}
		}},
		{Tool: abi.Tool{Name: "big", Description: "answers bytes bytes of text", Parameters: object(map[string]any{"bytes": map[string]any{"type": "integer"}})}, Run: func(c *abi.ToolCall) (string, error) {
			var a struct{ Bytes int }
			if err := json.Unmarshal([]byte(c.Arguments), &a); err != nil {
				return "", err
			}
			return strings.Repeat("0123456789abcdef", a.Bytes/16+1)[:a.Bytes], nil
		}},
	}})
}

func main() {}

func object(props map[string]any) map[string]any {
	if props == nil {
		props = map[string]any{}
	}
	return map[string]any{"type": "object", "properties": props}
}

var (
	echoAs string
	spins  int
)

func setup(cfg abi.PluginConfig) (abi.PluginInfo, error) {
	name, _ := cfg.Config["name"].(string)
	if name == "" {
		name = "toolbox"
	}
	info := abi.PluginInfo{Name: name, Version: "0.1.0", Kinds: []string{abi.KindTool}, Tools: []abi.Tool{
		{Name: "sleep", Description: "answers after ms milliseconds", Parameters: object(map[string]any{"ms": map[string]any{"type": "integer"}})},
	}}
	if as, _ := cfg.Config["echo_as"].(string); as != "" {
		info.Tools = append(info.Tools, abi.Tool{Name: as, Description: "answers its arguments"})
		echoAs = as
	}
	return info, nil
}

// sleeping maps the token of each kernel call a sleep is waiting for to
// the tool call it answers.
var sleeping = map[int64]string{}

// handle answers what the SDK leaves to it: sleep, and echo under its
// other name.
func handle(b *abi.Batch) (abi.Reply, error) {
	var reply abi.Reply
	answer := func(id, content string, isError bool) {
		reply.ToolResults = append(reply.ToolResults, abi.ToolResult{ID: id, Content: content, IsError: isError})
	}
	for _, c := range b.ToolCalls {
		switch c.Name {
		case echoAs:
			answer(c.ID, c.Arguments, false)
		case "sleep":
			var a struct{ MS int }
			if err := json.Unmarshal([]byte(c.Arguments), &a); err != nil {
				answer(c.ID, err.Error(), true)
				continue
			}
			secs := strconv.FormatFloat(float64(a.MS)/1000, 'f', -1, 64)
			tok, err := plugin.Call(abi.MethodProcessSpawn, abi.SpawnParams{Argv: []string{"/bin/sleep", secs}})
			if err != nil {
				answer(c.ID, err.Error(), true)
				continue
			}
			sleeping[tok] = c.ID
		default:
			answer(c.ID, "no tool "+c.Name, true)
		}
	}
	for _, r := range b.CallResults {
		id, ok := sleeping[r.Token]
		if !ok {
			continue
		}
		delete(sleeping, r.Token)
		if r.Error != nil {
			answer(id, r.Error.Message, true)
			continue
		}
		// A spawn's result is the process: wait for it. A wait's result
		// is the answer.
		var info abi.ProcessInfo
		if msgpack.Unmarshal(r.Result, &info) == nil && info.Status == abi.ProcessRunning {
			tok, err := plugin.Call(abi.MethodProcessWait, abi.WaitParams{ProcessID: info.ID})
			if err != nil {
				answer(id, err.Error(), true)
				continue
			}
			sleeping[tok] = id
			continue
		}
		answer(id, "slept", false)
	}
	return reply, nil
}
