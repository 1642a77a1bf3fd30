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

// The agent's tools are offered under names OpenAI accepts, distinct from
// one another and from process_spawn; a call of one comes back as a
// tool_call of the agent's name, its JSON arguments as they are.
func TestOfferedTools(t *testing.T) {
	in := &abi.AgentInput{Tools: []abi.Tool{
		{Name: "process.spawn"}, {Name: "mcp.files.read_file"}, {Name: "mcp_files_read_file"}, {Name: "skill.progress-demo"},
		{Name: "process_spawn"}, {Name: strings.Repeat("x", 70)},
	}}
	var names []string
	for _, tool := range offer(in) {
		names = append(names, tool.Name)
	}
	want := []string{"process_spawn", "mcp_files_read_file", "mcp_files_read_file_2", "skill_progress-demo", "process_spawn_2", strings.Repeat("x", 64)}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("offered %q; want %q", names, want)
	}
	_, acts, err := parse(&abi.ChatMessage{ToolCalls: []abi.ToolCall{{ID: "c", Name: "mcp_files_read_file", Arguments: `{"path":"/srv/a"}`}}}, "cause-1")
	if err != nil || len(acts) != 1 {
		t.Fatalf("actions %+v, err %v", acts, err)
	}
	var d abi.ActionData
	msgpack.Unmarshal(acts[0].Data, &d)
	if acts[0].Type != abi.ActionToolCall || d.Tool != "mcp.files.read_file" || d.Args != `{"path":"/srv/a"}` {
		t.Fatalf("action %s %+v", acts[0].Type, d)
	}
	if _, _, err := parse(&abi.ChatMessage{ToolCalls: []abi.ToolCall{{Name: "skill_progress-demo", Arguments: `{oops`}}}, "c"); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Fatalf("bad arguments: %v", err)
	}
}
