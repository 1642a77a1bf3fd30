package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Several agents in one kairo up, from the person's side, with the real
// binary and a real daemon.

// opsAgent is an agent that may run commands.
const opsAgent = `
[agents.ops]
policy = "rules"
description = "runs builds"
[agents.ops.grants]
commands = true
`

// viewerAgent is an agent with no grants: it may run nothing.
const viewerAgent = `
[agents.viewer]
policy = "rules"
`

// TestSeveralAgents runs two agents, then three, in one kairo up each,
// and shares the daemon across the subtests:
//   - kairo agents lists them, the default one first and marked, with
//     their grants;
//   - kairo send --agent ID reaches each: the run loop is ID's (kairo runs
//     --json), and what it ran is what ID's grants allow — the viewer,
//     without commands, refuses "run echo", while ops and the default
//     agent run it (the control);
//   - kairo chat: "@ID " sends a line to ID, an unaddressed line goes to
//     the default agent, --agent sends every line to one agent unless the
//     line names another, and each answer is headed by its agent;
//   - a message to an agent that does not exist (--agent nobody, "@nobody")
//     is answered once with the agents there are, exits 1, and starts no
//     run loop;
//   - kairo runs shows whose each run loop is and who asked for one
//     ("ask ops: ..."), --agent lists one agent's, and a message into a
//     task of ops (--run ID, "@ID" in the chat) reaches ops.
func TestSeveralAgents(t *testing.T) {
	t.Parallel()
	// What each agent's grants allow: [agent] has the default grants.
	commands := map[string]bool{"default": true, "ops": true, "viewer": false}
	for _, c := range []struct {
		name   string
		toml   string
		agents []string // the default one first
	}{
		{"two", opsAgent, []string{"default", "ops"}},
		{"three", opsAgent + viewerAgent, []string{"default", "ops", "viewer"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			if err := os.WriteFile(filepath.Join(home, "kairo.toml"), []byte(c.toml), 0o600); err != nil {
				t.Fatal(err)
			}
			startUp(t, home)
			t.Run("agents", func(t *testing.T) { checkAgentsListed(t, home, c.agents, commands) })
			t.Run("send --agent", func(t *testing.T) { checkSendAgent(t, home, c.agents, commands) })
			t.Run("chat", func(t *testing.T) { checkChatAgents(t, home, c.agents, commands) })
			t.Run("no such agent", func(t *testing.T) { checkNoSuchAgent(t, home, c.agents) })
			t.Run("runs", func(t *testing.T) { checkRunsAgents(t, home) })
			t.Run("memory", func(t *testing.T) { checkMemoryAgents(t, home) })
		})
	}
}

// checkMemoryAgents: each agent remembers its own tasks; kairo memory
// search --agent reads the one it names, the default agent's without.
func checkMemoryAgents(t *testing.T, home string) {
	if r := kairo(t, home, "send", "--agent", "ops", "run echo walrus-of-ops"); r.code != 0 {
		t.Fatalf("send to ops:\n%s", r)
	}
	until(t, "ops's memory of its task", func() bool {
		return strings.Contains(kairo(t, home, "memory", "search", "--agent", "ops", "walrus").stdout, "walrus-of-ops")
	})
	if r := kairo(t, home, "memory", "search", "walrus"); strings.Contains(r.stdout, "walrus-of-ops") {
		t.Errorf("the default agent's memory holds ops's task:\n%s", r)
	}
	if r := kairo(t, home, "memory", "search", "--agent", "nobody", "walrus"); r.code == 0 || !strings.Contains(r.stderr, `no agent "nobody"`) {
		t.Errorf("the memory of no agent:\n%s", r)
	}
}

// checkAgentsListed: kairo agents --json and its table.
func checkAgentsListed(t *testing.T, home string, agents []string, commands map[string]bool) {
	r := kairo(t, home, "agents", "--json")
	if r.code != 0 {
		t.Fatalf("kairo agents --json:\n%s", r)
	}
	objs := jsonLines(t, "kairo agents --json", r.stdout, "id", "default", "policy", "description", "grants", "actsFor", "memory", "open")
	if len(objs) != len(agents) {
		t.Fatalf("kairo agents --json lists %d agents, want %v:\n%s", len(objs), agents, r.stdout)
	}
	for i, o := range objs {
		g, _ := o["grants"].(map[string]any)
		if o["id"] != agents[i] || o["default"] != (i == 0) || o["policy"] != "rules" || g == nil || g["commands"] != commands[agents[i]] {
			t.Errorf("kairo agents --json line %d: %v; want agent %q, default %v, commands %v", i, o, agents[i], i == 0, commands[agents[i]])
		}
		if agents[i] == "ops" && o["description"] != "runs builds" {
			t.Errorf("ops is described %q", o["description"])
		}
	}
	r = kairo(t, home, "agents")
	if r.code != 0 || !regexpMatch(`(?m)^\* default\s+rules\s+0\s+\*\s+yes\s`, r.stdout) || !regexpMatch(`(?m)^  ops\s+rules\s+0\s+-\s+yes\s.*runs builds$`, r.stdout) {
		t.Fatalf("kairo agents:\n%s", r)
	}
	if len(agents) == 3 && !regexpMatch(`(?m)^  viewer\s+rules\s+0\s+-\s+no\s`, r.stdout) {
		t.Errorf("kairo agents lists the viewer otherwise:\n%s", r)
	}
}

// checkSendAgent: kairo send --agent reaches each agent, which runs what
// its grants allow.
func checkSendAgent(t *testing.T, home string, agents []string, commands map[string]bool) {
	for _, id := range agents {
		goal := "run echo sent-to-" + id
		r := kairo(t, home, "send", "--agent", id, goal)
		want := "`echo sent-to-" + id + "` finished in"
		if !commands[id] {
			want = "I could not run it: permission denied"
		}
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("kairo send --agent %s %q printed no %q:\n%s", id, goal, want, r)
		}
		if o, ok := runsJSON(t, home, "--all", "--limit", "100")[goal]; !ok || o.Agent != id {
			t.Errorf("the run loop of %q: %+v (listed %v); want agent %s's", goal, o, ok, id)
		}
	}
	spawned := kairo(t, home, "events", "replay", "kairo.process.spawned").stdout
	for _, id := range agents {
		if ran := strings.Contains(spawned, "sent-to-"+id); ran != commands[id] {
			t.Errorf("agent %s ran echo: %v; its grants allow commands: %v\n%s", id, ran, commands[id], spawned)
		}
	}
}

// checkChatAgents: kairo chat addresses agents with "@ID " and --agent.
func checkChatAgents(t *testing.T, home string, agents []string, commands map[string]bool) {
	var lines, want []string
	answer := func(id, goal string) string {
		if !commands[id] {
			return id + "> I could not run it: permission denied"
		}
		return id + "> `" + strings.TrimPrefix(goal, "run ") + "` finished in"
	}
	goals := map[string]string{"run echo chat-unaddressed": "default"}
	for _, id := range agents {
		goal := "run echo chat-" + id
		lines, want = append(lines, "@"+id+" "+goal), append(want, answer(id, goal))
		goals[goal] = id
	}
	lines, want = append(lines, "run echo chat-unaddressed"), append(want, answer("default", "run echo chat-unaddressed"))
	if r := chatUntil(t, home, nil, lines, want...); r.code != 0 {
		t.Errorf("kairo chat: %s", r)
	}

	// --agent: every line to ops, but one that names another agent.
	goals["run echo chat-agent-ops"], goals["run echo chat-override"] = "ops", "default"
	if r := chatUntil(t, home, []string{"--agent", "ops"}, []string{"run echo chat-agent-ops", "@default run echo chat-override"},
		answer("ops", "run echo chat-agent-ops"), answer("default", "run echo chat-override")); r.code != 0 {
		t.Errorf("kairo chat --agent ops: %s", r)
	}
	runs := runsJSON(t, home, "--all", "--limit", "100")
	for goal, id := range goals {
		if o, ok := runs[goal]; !ok || o.Agent != id {
			t.Errorf("the run loop of the chat's %q: %+v (listed %v); want agent %s's", goal, o, ok, id)
		}
	}
	if r := kairo(t, home, "chat", "--agent", "nobody"); r.code != 1 || !strings.Contains(r.stderr, `there is no agent "nobody"; the agents are `+strings.Join(agents, ", ")) {
		t.Errorf("kairo chat --agent nobody:\n%s", r)
	}
}

// chatUntil runs kairo chat with flags, types lines, and ends it (as
// Ctrl-D does) once its output holds each of want, or after a minute.
func chatUntil(t *testing.T, home string, flags, lines []string, want ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kairoBin, append([]string{"chat"}, flags...)...)
	cmd.Env = childEnv(home)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		io.WriteString(in, l+"\n")
	}
	all := func() bool {
		for _, w := range want {
			if !strings.Contains(stdout.String(), w) {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(time.Minute); !all() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	in.Close()
	err = cmd.Wait()
	r := result{stdout.String(), stderr.String(), 0}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	}
	for _, w := range want {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("kairo chat %v, typed %q, printed no %q:\n%s", flags, lines, w, r)
		}
	}
	return r
}

// checkNoSuchAgent: a message to an agent that does not exist is
// answered once, saying which agents there are, and starts nothing.
func checkNoSuchAgent(t *testing.T, home string, agents []string) {
	before := runsJSON(t, home, "--all", "--limit", "1000")
	want := `There is no agent "nobody". The agents are "` + strings.Join(agents, `", "`) + `"`
	for _, args := range [][]string{{"send", "--agent", "nobody", "run echo lost"}, {"send", "@nobody run echo lost"}} {
		if r := kairo(t, home, args...); r.code != 1 || !strings.Contains(r.stdout, want) {
			t.Errorf("kairo %s: want exit 1 and %q:\n%s", strings.Join(args, " "), want, r)
		}
	}
	after := runsJSON(t, home, "--all", "--limit", "1000")
	if _, ok := after["run echo lost"]; ok || len(after) != len(before) {
		t.Errorf("a message to no agent started a run loop: %d listed before, %d after: %+v", len(before), len(after), after)
	}
}

// checkRunsAgents: kairo runs says whose each run loop is and who asked
// for one; --agent lists one agent's; a message into a task of ops
// reaches ops.
func checkRunsAgents(t *testing.T, home string) {
	if r := kairo(t, home, "send", "ask ops: run echo asked"); r.code != 0 || !strings.Contains(r.stdout, "ops: `echo asked` finished in") {
		t.Fatalf("ask ops:\n%s", r)
	}
	runs := runsJSON(t, home, "--limit", "100")
	if o := runs["run echo asked"]; o.Agent != "ops" || o.Ask == nil || o.Ask.Agent != "default" || o.Ask.Grants != "intersection" {
		t.Errorf("the asked run loop: %+v (ask %+v); want ops's, asked by default, held to both agents' grants", o, o.Ask)
	}
	if o := runs["ask ops: run echo asked"]; o.Agent != "default" || o.Ask != nil {
		t.Errorf("the asking run loop: %+v; want the default agent's, asked by no one", o)
	}
	r := kairo(t, home, "runs", "--limit", "100")
	if r.code != 0 || !regexpMatch(`(?m)^ID\s+AGENT\s+STARTED\s`, r.stdout) || !regexpMatch(`(?m)^\S+\s+ops, asked by default\s.*\srun echo asked$`, r.stdout) ||
		!regexpMatch(`(?m)^\S+\s+default\s.*\srun echo sent-to-default$`, r.stdout) || !regexpMatch(`(?m)^\S+\s+ops\s.*\srun echo sent-to-ops$`, r.stdout) {
		t.Errorf("kairo runs:\n%s", r)
	}
	ops := runsJSON(t, home, "--agent", "ops", "--limit", "100")
	for goal, o := range ops {
		if o.Agent != "ops" {
			t.Errorf("kairo runs --agent ops lists %q, %s's", goal, o.Agent)
		}
	}
	if _, ok := ops["run echo sent-to-ops"]; !ok {
		t.Errorf("kairo runs --agent ops does not list ops's run echo sent-to-ops: %+v", ops)
	}
	if r := kairo(t, home, "runs", "--agent", "nobody"); r.code != 1 || !strings.Contains(r.stderr, `there is no agent "nobody"`) {
		t.Errorf("kairo runs --agent nobody:\n%s", r)
	}

	// Into a task of ops: by its id, the message reaches ops.
	if r := kairo(t, home, "send", "--agent", "ops", "--no-follow", "run sleep 30"); r.code != 0 {
		t.Fatalf("send --agent ops run sleep 30:\n%s", r)
	}
	var id string
	until(t, "ops's sleep running", func() bool {
		o := runsJSON(t, home, "--open", "--agent", "ops")["run sleep 30"]
		id = o.ID
		return o.InProgress > 0
	})
	short := id[len(id)-8:]
	if r := kairo(t, home, "send", "--run", short, "how far along is it?"); r.code != 0 || !strings.Contains(r.stdout, "`sleep 30` is running") {
		t.Errorf("kairo send --run %s into ops's task:\n%s", short, r)
	}
	chatUntil(t, home, nil, []string{fmt.Sprintf("@%s stop", short)}, "ops> Stopped")
	until(t, "ops's sleep canceled", func() bool {
		return runsJSON(t, home, "--agent", "ops", "--limit", "100")["run sleep 30"].Status == "canceled"
	})
}
