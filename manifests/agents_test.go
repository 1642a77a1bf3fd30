package manifests

import (
	"reflect"
	"strings"
	"testing"
)

// TestAgentsTables: an [agents.ID] table is an agent of its own — its id
// its table's name, the [agent] defaults for what it leaves out, but no
// grants unless it lists them; the default agent keeps its own.
func TestAgentsTables(t *testing.T) {
	c, err := Load(writeConfig(t, `
[agents.ops]
description = "runs builds"
hz = 50
acts_for = ["default"]
[agents.ops.grants]
commands = true
hosts = ["api.github.com:443"]

[agents.viewer]
memory = "ops"
`))
	if err != nil {
		t.Fatal(err)
	}
	ops, viewer := c.Agents["ops"], c.Agents["viewer"]
	if ops.ID != "ops" || ops.Hz != 50 || ops.Policy != "rules" || ops.MaxIterations != 25 || ops.BargeIn != "boundary" || ops.Description != "runs builds" {
		t.Errorf("ops = %+v", ops)
	}
	if want := (AgentGrants{Commands: true, Hosts: []string{"api.github.com:443"}}); !reflect.DeepEqual(ops.Grants, want) {
		t.Errorf("ops's grants = %+v, want %+v", ops.Grants, want)
	}
	if viewer.Grants.Commands || len(viewer.Grants.Skills) > 0 || viewer.Hz != 10 || viewer.Memory != "ops" {
		t.Errorf("viewer = %+v: want no grants, the default rate, ops's memory", viewer)
	}
	if c.Agent.ID != "default" || !c.Agent.Grants.Commands {
		t.Errorf("the default agent changed: %+v", c.Agent)
	}
	ids := []string{}
	for _, a := range c.AllAgents() {
		ids = append(ids, a.ID)
	}
	if strings.Join(ids, ",") != "default,ops,viewer" {
		t.Errorf("AllAgents = %v", ids)
	}
	home := "/h"
	if got := c.AgentMemoryPath(home, viewer); got != "/h/memory-ops.db" {
		t.Errorf("viewer's memory = %q, want ops's", got)
	}
	if got := c.AgentMemoryPath(home, c.Agent); got != "/h/memory.db" {
		t.Errorf("the default agent's memory = %q", got)
	}
}

// TestAgentsErrors: each mistake in [agents.ID] and [router] is named by
// its key; the control is a valid file.
func TestAgentsErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"[agents.default]\nhz = 5\n", `agents.default: "default" is the id of [agent]`},
		{"[agents.ops]\nacts_for = [\"nobody\"]\n", `agents.ops.acts_for[0]: "nobody" names no agent; the agents are "default", "ops"`},
		{"[agents.ops]\nacts_for = [\"ops\"]\n", `agents.ops.acts_for[0]: "ops" is the agent itself`},
		{"[agents.ops]\nmemory = \"web\"\n", `agents.ops.memory: "web": want "own", "none" or the id`},
		{"[agents.ops]\nmemory = \"none\"\n[agents.web]\nmemory = \"ops\"\n", `agents.web.memory: "ops" does not keep a memory of its own`},
		{"[agents.Ops]\n", `agents.Ops.id: "Ops" is not an agent id`},
		{"[agents.ops]\nhz = -1\n", `agents.ops.hz: -1: want a rate above 0`},
		{"[agents.ops.grants]\nhosts = [\"http://x\"]\n", `agents.ops.grants.hosts[0]`},
		{"[router]\nmax_ask_depth = 0\n", `router.max_ask_depth: 0: want 1 to 16`},
	} {
		_, err := Load(writeConfig(t, c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.text, err, c.want)
		}
	}
	if _, err := Load(writeConfig(t, "[agents.ops]\nmemory = \"default\"\nacts_for = [\"default\"]\n[router]\nmax_ask_depth = 5\n")); err != nil {
		t.Errorf("a valid file: %v", err)
	}
}
