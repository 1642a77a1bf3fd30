package plugin

import (
	"errors"
	"reflect"
	"testing"

	"github.com/kairo-os/kairo/abi"
)

// The SDK runs a batch's tool calls with the registered tools, leaves the
// others to Handle, and describes the tools in the plugin's info.
func TestTools(t *testing.T) {
	defer Register(Plugin{})
	var handled []string
	Register(Plugin{
		Handle: func(b *abi.Batch) (abi.Reply, error) {
			var reply abi.Reply
			for _, c := range b.ToolCalls {
				handled = append(handled, c.Name)
				reply.ToolResults = append(reply.ToolResults, abi.ToolResult{ID: c.ID, Content: "later"})
			}
			return reply, nil
		},
		Tools: []Tool{
			{Tool: abi.Tool{Name: "upper"}, Run: func(c *abi.ToolCall) (string, error) { return "UP " + c.Arguments, nil }},
			{Tool: abi.Tool{Name: "fail"}, Run: func(*abi.ToolCall) (string, error) { return "", errors.New("no") }},
		},
	})
	b := &abi.Batch{ToolCalls: []abi.ToolCall{{ID: "1", Name: "upper", Arguments: "x"}, {ID: "2", Name: "other"}, {ID: "3", Name: "fail"}}}
	reply, err := module.run(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []abi.ToolResult{{ID: "1", Content: "UP x"}, {ID: "3", Content: "no", IsError: true}, {ID: "2", Content: "later"}}
	if !reflect.DeepEqual(reply.ToolResults, want) || !reflect.DeepEqual(handled, []string{"other"}) {
		t.Errorf("results %+v, handled %v", reply.ToolResults, handled)
	}

	info := abi.PluginInfo{Tools: []abi.Tool{{Name: "upper", Description: "Init's own"}}}
	module.describe(&info)
	if len(info.Tools) != 2 || info.Tools[0].Description != "Init's own" || info.Tools[1].Name != "fail" {
		t.Errorf("info tools %+v", info.Tools)
	}

	// Without a Handle, a call of no registered tool is answered with an
	// error; with neither, the batch is.
	Register(Plugin{Tools: []Tool{{Tool: abi.Tool{Name: "upper"}, Run: func(*abi.ToolCall) (string, error) { return "", nil }}}})
	reply, err = module.run(&abi.Batch{ToolCalls: []abi.ToolCall{{ID: "9", Name: "nope"}}})
	if err != nil || len(reply.ToolResults) != 1 || !reply.ToolResults[0].IsError || reply.ToolResults[0].Content != `this plugin has no tool "nope"` {
		t.Errorf("no Handle: %+v %v", reply, err)
	}
	Register(Plugin{})
	if _, err := module.run(&abi.Batch{}); err == nil {
		t.Error("a plugin with neither Handle nor Tools handled a batch")
	}
}
