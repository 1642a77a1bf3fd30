package main

import (
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host/tools/modelname"
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
	offered := map[string]string{} // model's name → agent's
	var names []string
	for _, tool := range offer(in) {
		names = append(names, tool.Name)
		offered[tool.Name] = st.offered[tool.Name]
	}
	if len(names) != 6 || names[0] != "process_spawn" || offered["skill_progress-demo"] != "skill.progress-demo" {
		t.Fatalf("offered %q", names)
	}
	for _, n := range names {
		if !modelname.Valid(n) {
			t.Errorf("offered %q, which OpenAI refuses", n)
		}
	}
	read := modelname.Assign([]string{"process.spawn", "mcp.files.read_file", "mcp_files_read_file", "skill.progress-demo", "process_spawn", strings.Repeat("x", 70)})["mcp.files.read_file"]
	if offered[read] != "mcp.files.read_file" || !strings.HasPrefix(read, "mcp_files_read_file_") {
		t.Fatalf("mcp.files.read_file offered as %q: %q", read, offered)
	}
	_, acts, err := parse(&abi.ChatMessage{ToolCalls: []abi.ToolCall{{ID: "c", Name: read, Arguments: `{"path":"/srv/a"}`}}}, "cause-1")
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

// The attack of issue 15: two MCP tools whose names share their first 70
// characters made offer's de-duplication loop run for ever. Each is now
// offered under a name of its own, and a call of either reaches it.
func TestOfferLongNamesThatShareAPrefix(t *testing.T) {
	prefix := "mcp.evil." + strings.Repeat("a", 61)
	in := &abi.AgentInput{Tools: []abi.Tool{{Name: prefix + "one"}, {Name: prefix + "two"}, {Name: "mcp.good.echo"}}}
	done := make(chan []abi.Tool)
	go func() { done <- offer(in) }()
	var got []abi.Tool
	select {
	case got = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("offer did not end")
	}
	if len(got) != 4 || got[3].Name != "mcp_good_echo" {
		t.Fatalf("offered %d tools: %+v", len(got), got)
	}
	if a, b := got[1].Name, got[2].Name; a == b || !modelname.Valid(a) || !modelname.Valid(b) {
		t.Fatalf("offered %q and %q", a, b)
	}
	for _, tool := range got[1:3] {
		_, acts, err := parse(&abi.ChatMessage{ToolCalls: []abi.ToolCall{{ID: "c", Name: tool.Name, Arguments: `{}`}}}, "cause-1")
		var d abi.ActionData
		if err == nil && len(acts) == 1 {
			msgpack.Unmarshal(acts[0].Data, &d)
		}
		if !strings.HasPrefix(d.Tool, prefix) {
			t.Fatalf("a call of %s: %v, %+v", tool.Name, err, d)
		}
	}
}
