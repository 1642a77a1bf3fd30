package main

import (
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name, content string
		calls         []abi.ToolCall
		want          []string // type:text-or-args per action
		err           string
	}{
		{"json", `{"thought":"t","action":{"type":"say","text":"hi","done":true}}`, nil, []string{"say:hi"}, ""},
		{"fenced", "```json\n{\"action\":{\"type\":\"query\",\"text\":\"which?\"}}\n```", nil, []string{"query:which?"}, ""},
		{"several", `{"actions":[{"type":"cancel","runLoopId":"r1"},{"type":"tool_call","tool":"process.spawn","args":{"command":"ls"}}]}`, nil, []string{"cancel:", `tool_call:{"command":"ls"}`}, ""},
		{"noop", `{"thought":"nothing","action":{"type":"noop"}}`, nil, nil, ""},
		{"tool call", "", []abi.ToolCall{{ID: "c", Name: "process_spawn", Arguments: `{"command":"make"}`}}, []string{`tool_call:{"command":"make"}`}, ""},
		{"prose", "Sure thing!", nil, nil, "not the JSON {thought, action} asked for"},
		{"unknown action", `{"action":{"type":"dance"}}`, nil, nil, `action "dance"`},
		{"unknown tool", "", []abi.ToolCall{{Name: "rm_rf", Arguments: `{}`}}, nil, "called rm_rf({})"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, acts, err := parse(&abi.ChatMessage{Content: c.content, ToolCalls: c.calls}, "cause-1")
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || len(acts) != len(c.want) {
				t.Fatalf("actions %+v, err %v; want %q", acts, err, c.want)
			}
			for i, a := range acts {
				var d abi.ActionData
				msgpack.Unmarshal(a.Data, &d)
				if got := a.Type + ":" + d.Text + d.Args; got != c.want[i] || a.CausationID != "cause-1" {
					t.Fatalf("action %d = %q (cause %q), want %q", i, got, a.CausationID, c.want[i])
				}
			}
		})
	}
}
