package plugin_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/plugin"
)

// A plugin that serves "upper.text" to other plugins and publishes every
// demo.* event it receives back in upper case. Built with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o upper.wasm
//
// and dropped into the plugins folder with upper.toml beside it, granting
// subscribe ["demo.>"] and publish ["upper.>"].
func Example() {
	plugin.Register(plugin.Plugin{
		Init: func(abi.PluginConfig) (abi.PluginInfo, error) {
			return abi.PluginInfo{
				Name:          "upper",
				Kinds:         []string{abi.KindTool},
				Subscriptions: []string{"demo.>"},
				Services:      []string{"upper.text"},
			}, nil
		},
		Handle: func(b *abi.Batch) (abi.Reply, error) {
			var reply abi.Reply
			for _, ev := range b.Events {
				var s string
				if msgpack.Unmarshal(ev.Data, &s) != nil {
					continue
				}
				data, _ := msgpack.Marshal(strings.ToUpper(s))
				if err := plugin.Publish(&abi.Event{Type: "upper." + ev.Type, Data: data, CausationID: ev.ID}); err != nil {
					plugin.Log(4, err.Error()) // not granted, or too many in this batch
				}
			}
			for _, c := range b.ServiceCalls {
				var s string
				res := abi.CallResult{Token: c.ID}
				if err := msgpack.Unmarshal(c.Args, &s); err != nil {
					res.Error = abi.Errorf(abi.CodeInvalidParams, "upper.text takes a string: %v", err)
				} else {
					res.Result, _ = msgpack.Marshal(strings.ToUpper(s))
				}
				reply.ServiceResults = append(reply.ServiceResults, res)
			}
			return reply, nil
		},
	})
}

// A tool plugin: its tools' definitions and the functions that run them.
// The SDK describes them in the plugin's info and answers each call; the
// manifest declares kinds = ["tool"]. The agent sees the tool as
// "words.count" (the plugin's name, then the tool's).
func ExampleTool() {
	plugin.Register(plugin.Plugin{
		Init: func(abi.PluginConfig) (abi.PluginInfo, error) {
			return abi.PluginInfo{Name: "words", Kinds: []string{abi.KindTool}}, nil
		},
		Tools: []plugin.Tool{{
			Tool: abi.Tool{
				Name:        "count",
				Description: "Count the words of a text",
				Parameters: map[string]any{
					"type":       "object",
					"properties": map[string]any{"text": map[string]any{"type": "string"}},
					"required":   []string{"text"},
				},
			},
			Run: func(call *abi.ToolCall) (string, error) {
				var args struct{ Text string }
				if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
					return "", fmt.Errorf("arguments: %w", err)
				}
				return strconv.Itoa(len(strings.Fields(args.Text))), nil
			},
		}},
	})
}
