package agent

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/memory"
	"github.com/kairo-os/kairo/kernel"
)

func TestRouterPick(t *testing.T) {
	rt, err := NewRouter("default", []AgentSpec{{ID: "default"}, {ID: "ops"}, {ID: "web"}}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		m           abi.UserMessage
		id, text    string
		known       bool
		description string
	}{
		{abi.UserMessage{Text: "run make"}, "default", "run make", true, "no address: the default agent"},
		{abi.UserMessage{Text: "run make", Agent: "ops"}, "ops", "run make", true, "targetAgentId"},
		{abi.UserMessage{Text: "run make", Agent: "nobody"}, "nobody", "run make", false, "targetAgentId of no agent"},
		{abi.UserMessage{Text: "@web run make"}, "web", "run make", true, "@ID"},
		{abi.UserMessage{Text: "@Web: run make"}, "web", "run make", true, "@ID: in another case"},
		{abi.UserMessage{Text: "@nobody run make"}, "nobody", "run make", false, "@ID of no agent"},
		{abi.UserMessage{Text: "ops: run make"}, "ops", "run make", true, "ID:"},
		{abi.UserMessage{Text: "ops, status"}, "ops", "status", true, "ID,"},
		{abi.UserMessage{Text: "note: buy milk"}, "default", "note: buy milk", true, "a word and a colon that names no agent"},
		{abi.UserMessage{Text: "ops:"}, "default", "ops:", true, "an address with nothing after it"},
		{abi.UserMessage{Text: "run ops: make"}, "default", "run ops: make", true, "a name not at the start"},
		{abi.UserMessage{Text: "run make", RunLoopID: "ops"}, "ops", "run make", true, "a chat's @ops read as a run loop's address"},
		{abi.UserMessage{Text: "run make", RunLoopID: "01j9xk"}, "default", "run make", true, "a run loop's id"},
	} {
		id, text, known := rt.Pick(&c.m)
		if id != c.id || text != c.text || known != c.known {
			t.Errorf("%s: Pick(%+v) = %q, %q, %v; want %q, %q, %v", c.description, c.m, id, text, known, c.id, c.text, c.known)
		}
	}
}

// askingPolicy asks the agent to each message it is sent, and says the
// answer of each ask it gets, ending the run loop.
func askingPolicy(to string) PolicyFunc {
	return func(_ context.Context, b *abi.Batch) (*abi.Reply, error) {
		var reply abi.Reply
		for _, ev := range b.Events {
			switch {
			case abi.IsAgentMessageSubject(ev.Type):
				var m abi.UserMessage
				if msgpack.Unmarshal(ev.Data, &m) != nil {
					continue
				}
				target, text, _ := strings.Cut(m.Text, " ")
				if to != "" {
					target, text = to, m.Text
				}
				if target == "echo" {
					reply.Actions = append(reply.Actions, abi.Action{Type: abi.ActionSay, CausationID: ev.ID,
						Data: mustData(abi.ActionData{Text: text, Done: true})})
					continue
				}
				args, _ := json.Marshal(abi.AgentAskArgs{Agent: target, Text: text})
				reply.Actions = append(reply.Actions, abi.Action{Type: abi.ActionToolCall, CausationID: ev.ID,
					Data: mustData(abi.ActionData{Tool: abi.ToolAgentAsk, Args: string(args)})})
			case ev.Type == abi.SubjectToolResult:
				var r abi.ToolResultEvent
				if msgpack.Unmarshal(ev.Data, &r) != nil || r.Tool != abi.ToolAgentAsk {
					continue
				}
				text := r.Error
				if r.Status == abi.StatusDone {
					msgpack.Unmarshal(r.Result, &text)
				}
				reply.Actions = append(reply.Actions, abi.Action{Type: abi.ActionSay, CorrelationID: ev.CorrelationID,
					Data: mustData(abi.ActionData{Text: "answer " + r.Status + ": " + text, Done: true})})
			}
		}
		return &reply, nil
	}
}

func mustData(d abi.ActionData) msgpack.RawMessage {
	b, _ := msgpack.Marshal(d)
	return b
}

// agents starts the agents of specs on e, each with the policy policies
// names (a PolicyFunc, or "rules").
func (e *env) agents(specs []AgentSpec, policies map[string]Policy) (*Router, map[string]*Runtime) {
	e.t.Helper()
	rt, err := NewRouter(specs[0].ID, specs, 3, 8)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]*Runtime{}
	for _, s := range specs {
		out[s.ID] = e.start(Config{Agent: s.ID, Policy: policies[s.ID], Router: rt})
	}
	return rt, out
}

// message publishes m, a user message, with a new message id.
func (e *env) message(m abi.UserMessage) *abi.Event {
	e.t.Helper()
	m.MessageID = abi.NewID()
	raw, _ := msgpack.Marshal(m)
	ev := &abi.Event{Type: abi.SubjectUserMessage, Source: "test", Data: raw}
	if _, err := e.bus.Publish(context.Background(), ev); err != nil {
		e.t.Fatal(err)
	}
	return ev
}

// started matches the start of a run loop of agent.
func startedBy(agent string) func(*abi.Event) bool {
	return func(ev *abi.Event) bool {
		if ev.Type != abi.SubjectIntentStarted {
			return false
		}
		var d abi.IntentStarted
		return msgpack.Unmarshal(ev.Data, &d) == nil && d.Agent == agent && ev.Source == "agent/"+agent
	}
}

// TestAgentsRoute: with two agents, a message reaches the one it names
// (targetAgentId, @ID, ID:) and no other; one that names none reaches the
// default agent; one that names an agent that does not exist reaches none
// and is answered by the default agent, once.
func TestAgentsRoute(t *testing.T) {
	e := newEnv(t)
	rules := e.rules()
	all := &kernel.SpawnAuthority{Skills: []string{"*"}, Commands: true}
	e.agents([]AgentSpec{{ID: "default", Spawn: all}, {ID: "ops", Spawn: all}}, map[string]Policy{"default": rules, "ops": rules})

	send := e.message
	routedTo := func(ev *abi.Event) (string, string) {
		r := e.events.until(t, "the message routed", func(x *abi.Event) bool { return abi.IsAgentMessageSubject(x.Type) && x.CausationID == ev.ID })
		m := decodeAs[abi.UserMessage](t, r)
		return r.Type, m.Text
	}
	for _, c := range []struct {
		m         abi.UserMessage
		typ, text string
	}{
		{abi.UserMessage{Text: "run echo one", Agent: "ops"}, "kairo.agent.ops.message", "run echo one"},
		{abi.UserMessage{Text: "@ops run echo two"}, "kairo.agent.ops.message", "run echo two"},
		{abi.UserMessage{Text: "ops: run echo three"}, "kairo.agent.ops.message", "run echo three"},
		{abi.UserMessage{Text: "run echo four"}, "kairo.agent.default.message", "run echo four"}, // the control
	} {
		ev := send(c.m)
		if typ, text := routedTo(ev); typ != c.typ || text != c.text {
			t.Errorf("%+v: routed as %s %q, want %s %q", c.m, typ, text, c.typ, c.text)
		}
	}
	e.events.until(t, "a run loop of ops", startedBy("ops"))
	e.events.until(t, "a run loop of default", startedBy("default"))

	// Sent into a task of ops's without naming ops: ops takes it.
	send(abi.UserMessage{Text: "run sleep 30", Agent: "ops"})
	sleeping := e.events.until(t, "ops's sleep", func(x *abi.Event) bool {
		return x.Type == abi.SubjectProcessSpawned && strings.Contains(decodeAny(x.Data), "sleep")
	})
	into := send(abi.UserMessage{Text: "progress", RunLoopID: sleeping.CorrelationID})
	if typ, _ := routedTo(into); typ != "kairo.agent.ops.message" {
		t.Errorf("a message into ops's task went to %s", typ)
	}

	ev := send(abi.UserMessage{Text: "@nobody run echo five"})
	ans := e.events.until(t, "the answer to a message for no agent", func(x *abi.Event) bool {
		return x.Type == abi.SubjectAgentAction && x.CausationID == ev.ID
	})
	if d := decodeAs[abi.ActionEvent](t, ans); !strings.Contains(d.Text, `There is no agent "nobody"`) || !strings.Contains(d.Text, `"default", "ops"`) || ans.Source != "agent/default" {
		t.Errorf("the answer to @nobody: %s %q", ans.Source, d.Text)
	}
	// A last message, so what came of @nobody is all in the log.
	last := send(abi.UserMessage{Text: "help"})
	routedTo(last)
	if n := len(e.events.all(func(x *abi.Event) bool { return abi.IsAgentMessageSubject(x.Type) && x.CausationID == ev.ID })); n != 0 {
		t.Errorf("a message for no agent was routed %d times", n)
	}
	if n := len(e.events.all(func(x *abi.Event) bool { return x.Type == abi.SubjectAgentAction && x.CausationID == ev.ID })); n != 1 {
		t.Errorf("a message for no agent was answered %d times, want once", n)
	}
}

// TestAskRoundTrip: an agent asks another, which runs a command for it;
// the answer comes back as the asking action's result, and every hop is
// caused by the one before.
func TestAskRoundTrip(t *testing.T) {
	e := newEnv(t)
	all := &kernel.SpawnAuthority{Skills: []string{"*"}, Commands: true}
	e.agents([]AgentSpec{{ID: "default", Spawn: all}, {ID: "ops", Spawn: all}}, map[string]Policy{"default": askingPolicy("ops"), "ops": e.rules()})
	e.say("run echo delegated", "")
	ask := e.events.until(t, "the ask", func(ev *abi.Event) bool {
		if ev.Type != abi.SubjectAgentAction || ev.Source != "agent/default" {
			return false
		}
		d := decodeAs[abi.ActionEvent](t, ev)
		return d.Tool == abi.ToolAgentAsk
	})
	routed := e.events.until(t, "the ask routed to ops", func(ev *abi.Event) bool { return ev.Type == "kairo.agent.ops.message" })
	if routed.CausationID != ask.ID || routed.Source != "agent/ops" {
		t.Errorf("the ask reached ops caused by %s from %s, want %s from agent/ops", routed.CausationID, routed.Source, ask.ID)
	}
	m := decodeAs[abi.UserMessage](t, routed)
	if m.Ask == nil || m.Ask.Agent != "default" || m.Ask.ActionID != ask.ID || m.Ask.RunLoopID != ask.CorrelationID || m.Ask.Depth != 1 ||
		m.Ask.Grants != abi.GrantsIntersection || strings.Join(m.Ask.Within, ",") != "default" {
		t.Errorf("the routed ask: %+v", m.Ask)
	}
	started := e.events.until(t, "ops's run loop", startedBy("ops"))
	if d := decodeAs[abi.IntentStarted](t, started); started.CausationID != routed.ID || d.Ask == nil || d.Ask.ActionID != ask.ID {
		t.Errorf("ops's run loop: caused by %s (want %s), ask %+v", started.CausationID, routed.ID, d.Ask)
	}
	ended := e.events.until(t, "ops's run loop's end", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectIntentEnded && ev.CorrelationID == started.CorrelationID
	})
	res := e.events.until(t, "the ask's result", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectToolResult && ev.CorrelationID == ask.CorrelationID
	})
	d := decodeAs[abi.ToolResultEvent](t, res)
	var answer string
	msgpack.Unmarshal(d.Result, &answer)
	if res.CausationID != ended.ID || d.ActionID != ask.ID || d.Status != abi.StatusDone || !strings.Contains(answer, "delegated") {
		t.Errorf("the result: caused by %s (want %s), %+v, answer %q", res.CausationID, ended.ID, d, answer)
	}
	e.events.until(t, "the asker's say of the answer", sayIn(ask.CorrelationID, "answer done"))
	// Each tool call of ops's run loop records whose ask it served.
	for _, ev := range e.events.all(func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectAgentAction && ev.CorrelationID == started.CorrelationID
	}) {
		if a := decodeAs[abi.ActionEvent](t, &ev); a.Type == abi.ActionToolCall && (a.For == nil || a.For.Agent != "default" || a.For.Grants != abi.GrantsIntersection) {
			t.Errorf("ops's tool call does not record the ask it serves: %+v", a.For)
		}
	}
}

// TestAskHeldToBothGrants: what an agent does for another holds no more
// than both agents' grants: asked by an agent without commands, the agent
// with them is refused one; acting for it by the operator's word (acts_for)
// it runs it, and records that it ran with its own grants. The control is
// the same agent asked directly.
func TestAskHeldToBothGrants(t *testing.T) {
	for _, own := range []bool{false, true} {
		t.Run(map[bool]string{false: "intersection", true: "acts_for"}[own], func(t *testing.T) {
			e := newEnv(t)
			ops := AgentSpec{ID: "ops", Spawn: &kernel.SpawnAuthority{Commands: true}}
			if own {
				ops.ActsFor = []string{"default"}
			}
			e.agents([]AgentSpec{{ID: "default", Spawn: &kernel.SpawnAuthority{}}, ops}, map[string]Policy{"default": askingPolicy("ops"), "ops": e.rules()})
			e.say("run echo for-default", "")
			started := e.events.until(t, "ops's run loop", startedBy("ops"))
			res := e.events.until(t, "ops's spawn result", func(ev *abi.Event) bool {
				return ev.Type == abi.SubjectToolResult && ev.CorrelationID == started.CorrelationID
			})
			d := decodeAs[abi.ToolResultEvent](t, res)
			if !own {
				if d.Status != abi.StatusFailed || !strings.Contains(d.Error, "may run only installed skills by name, not a command") {
					t.Fatalf("held to both grants, ops ran a command for an agent without them: %+v", d)
				}
			} else {
				if d.Status != abi.StatusDone || d.ProcessID == "" {
					t.Fatalf("acting for default with its own grants, ops did not run it: %+v", d)
				}
				call := e.events.until(t, "ops's tool call", func(ev *abi.Event) bool {
					return ev.Type == abi.SubjectAgentAction && ev.CorrelationID == started.CorrelationID && ev.ID == d.ActionID
				})
				if a := decodeAs[abi.ActionEvent](t, call); a.For == nil || a.For.Grants != abi.GrantsOwn || a.For.Agent != "default" {
					t.Errorf("the call does not record that it ran with ops's own grants for default: %+v", a.For)
				}
			}
			// The control: ops asked directly runs it.
			e.message(abi.UserMessage{Text: "run echo direct", Agent: "ops"})
			e.events.until(t, "ops's direct run", func(ev *abi.Event) bool {
				if ev.Type != abi.SubjectProcessExited {
					return false
				}
				x := decodeAs[abi.ProcessExitedEvent](t, ev)
				return len(x.LastLines) > 0 && x.LastLines[0].Text == "direct"
			})
		})
	}
}

// TestAskCanceled: canceling the run loop that asked ends the run loop
// that answers, and its process.
func TestAskCanceled(t *testing.T) {
	e := newEnv(t)
	all := &kernel.SpawnAuthority{Skills: []string{"*"}, Commands: true}
	e.agents([]AgentSpec{{ID: "default", Spawn: all}, {ID: "ops", Spawn: all}}, map[string]Policy{"default": askingPolicy("ops"), "ops": e.rules()})
	e.say("run sleep 60", "")
	started := e.events.until(t, "ops's run loop", startedBy("ops"))
	e.events.until(t, "ops's process", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectProcessSpawned && ev.CorrelationID == started.CorrelationID
	})
	asker := decodeAs[abi.IntentStarted](t, started).Ask.RunLoopID
	raw, _ := msgpack.Marshal(abi.CancelParams{CorrelationID: asker, Reason: "the test cancels"})
	if _, err := e.bus.Publish(context.Background(), &abi.Event{Type: abi.SubjectIntentCancel, Source: "test", Data: raw}); err != nil {
		t.Fatal(err)
	}
	end := e.events.until(t, "ops's run loop's end", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectIntentEnded && ev.CorrelationID == started.CorrelationID
	})
	if d := decodeAs[abi.IntentEnded](t, end); d.Status != "canceled" {
		t.Errorf("ops's run loop ended %q, want canceled", d.Status)
	}
	exit := e.events.until(t, "ops's process's exit", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectProcessExited && ev.CorrelationID == started.CorrelationID
	})
	if d := decodeAs[abi.ProcessExitedEvent](t, exit); d.ExitCode != nil && *d.ExitCode == 0 {
		t.Errorf("the process of the canceled ask ran to its end: %+v", d)
	}
	e.events.until(t, "the asker's end", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectIntentEnded && ev.CorrelationID == asker
	})
}

// TestAskRefused: an agent does not ask itself, nor one that does not
// exist, nor deeper than the router allows; the control asks another.
func TestAskRefused(t *testing.T) {
	e := newEnv(t)
	all := &kernel.SpawnAuthority{Skills: []string{"*"}, Commands: true}
	specs := []AgentSpec{{ID: "default", Spawn: all}, {ID: "a", Spawn: all}, {ID: "b", Spawn: all}}
	rt, err := NewRouter("default", specs, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	// Each agent asks whom the message's first word names, passing on the
	// rest: "a b default x" goes default → a → b → default.
	for _, s := range specs {
		e.start(Config{Agent: s.ID, Policy: askingPolicy(""), Router: rt})
	}
	result := func(text string) abi.ToolResultEvent {
		t.Helper()
		ev := e.say(text, "")
		routed := e.events.until(t, "the message routed", func(x *abi.Event) bool { return abi.IsAgentMessageSubject(x.Type) && x.CausationID == ev.ID })
		started := e.events.until(t, "its run loop", func(x *abi.Event) bool { return x.Type == abi.SubjectIntentStarted && x.CausationID == routed.ID })
		res := e.events.until(t, "the ask's result", func(x *abi.Event) bool {
			return x.Type == abi.SubjectToolResult && x.CorrelationID == started.CorrelationID
		})
		return decodeAs[abi.ToolResultEvent](t, res)
	}
	if d := result("default hello"); d.Status != abi.StatusFailed || !strings.Contains(d.Error, "does not ask itself") {
		t.Errorf("an ask of itself: %+v", d)
	}
	if d := result("nobody hello"); d.Status != abi.StatusFailed || !strings.Contains(d.Error, `no agent "nobody"`) {
		t.Errorf("an ask of no agent: %+v", d)
	}
	// default → a (depth 1) → b (depth 2) → default would be depth 3:
	// b is refused, and says so, and its answer comes back.
	if d := result("a b default echo deep"); d.Status != abi.StatusDone || !strings.Contains(decodeString(d.Result), "max_ask_depth") {
		t.Errorf("an ask past the depth: %+v %q", d, decodeString(d.Result))
	}
	// The control: a chain within the depth is answered by its end.
	if d := result("a b echo within"); d.Status != abi.StatusDone || !strings.HasSuffix(decodeString(d.Result), ": within") {
		t.Errorf("an ask within the depth: %+v %q", d, decodeString(d.Result))
	}
}

func decodeString(raw msgpack.RawMessage) string {
	var s string
	msgpack.Unmarshal(raw, &s)
	return s
}

// TestAskStaysInItsRunLoop: an ask is answered in the run loop it opens,
// never in a task of the asked agent's own: asked to "stop", ops does not
// stop the task its operator started (the asker learns why at once), and
// asked to "use sleep 1 instead", it does not restart it. The control:
// the operator's own "stop" to ops stops it.
func TestAskStaysInItsRunLoop(t *testing.T) {
	e := newEnv(t)
	all := &kernel.SpawnAuthority{Skills: []string{"*"}, Commands: true}
	e.agents([]AgentSpec{{ID: "default", Spawn: all}, {ID: "ops", Spawn: all}}, map[string]Policy{"default": askingPolicy("ops"), "ops": e.rules()})
	toOps := func(text string) { e.message(abi.UserMessage{Text: text, Agent: "ops"}) }
	toOps("run sleep 30")
	own := e.events.until(t, "ops's own task", startedBy("ops"))
	e.events.until(t, "its process", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectProcessSpawned && ev.CorrelationID == own.CorrelationID
	})
	askResult := func(text string) abi.ToolResultEvent {
		t.Helper()
		ev := e.say(text, "")
		routed := e.events.until(t, "the message routed", func(x *abi.Event) bool { return abi.IsAgentMessageSubject(x.Type) && x.CausationID == ev.ID })
		started := e.events.until(t, "the asking run loop", func(x *abi.Event) bool { return x.Type == abi.SubjectIntentStarted && x.CausationID == routed.ID })
		res := e.events.until(t, "the ask's result", func(x *abi.Event) bool {
			return x.Type == abi.SubjectToolResult && x.CorrelationID == started.CorrelationID
		})
		return decodeAs[abi.ToolResultEvent](t, res)
	}
	if d := askResult("stop"); d.Status != abi.StatusFailed || !strings.Contains(d.Error, "may cancel only what that ask started") {
		t.Errorf("asked to stop: %+v", d)
	}
	askResult("use sleep 1 instead")
	for _, ev := range e.events.all(func(ev *abi.Event) bool { return ev.CorrelationID == own.CorrelationID }) {
		switch ev.Type {
		case abi.SubjectIntentEnded, abi.SubjectProcessExited:
			t.Fatalf("an ask reached ops's own task: %s\n%s", ev.Type, e.events.dump())
		}
		if ev.Type == abi.SubjectAgentAction {
			if a := decodeAs[abi.ActionEvent](t, &ev); a.Type == abi.ActionToolCall && strings.Contains(a.Args, "sleep 1") {
				t.Fatalf("an ask restarted ops's own task: %+v", a)
			}
		}
	}
	toOps("stop")
	end := e.events.until(t, "ops's own task's end", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectIntentEnded && ev.CorrelationID == own.CorrelationID
	})
	if d := decodeAs[abi.IntentEnded](t, end); d.Status != "canceled" {
		t.Errorf("the operator's stop: %+v", d)
	}
}

// TestAgentsKeepTheirOwnMemory: each agent remembers its own run loops in
// its own store; memory.retrieve reads the one its params name, the
// default agent's when none. The control: the default agent's memory has
// its own run loop and not ops's.
func TestAgentsKeepTheirOwnMemory(t *testing.T) {
	e := newEnv(t)
	all := &kernel.SpawnAuthority{Skills: []string{"*"}, Commands: true}
	rt, err := NewRouter("default", []AgentSpec{{ID: "default", Spawn: all}, {ID: "ops", Spawn: all}}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	rules := e.rules()
	stores := map[string]*memory.Store{}
	for _, id := range []string{"default", "ops"} {
		s, err := memory.Open(filepath.Join(t.TempDir(), id+".db"), memory.Config{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[id] = s
		e.start(Config{Agent: id, Policy: rules, Router: rt, Memory: &Memory{Store: s}})
	}
	e.say("run echo zebra-default", "")
	e.say("@ops run echo walrus-ops", "")
	for _, id := range []string{"default", "ops"} {
		e.events.until(t, id+"'s run loop indexed", func(ev *abi.Event) bool { return ev.Type == SubjectMemoryIndexed && ev.Source == "agent/"+id })
	}
	found := func(agent, query string) int {
		raw, _ := msgpack.Marshal(abi.MemoryRetrieveParams{Query: query, K: 5, Agent: agent})
		out, aerr := e.kernel.Invoke(context.Background(), abi.MethodMemoryRetrieve, &kernel.Call{Session: rt.Runtime("default").sess, Params: raw})
		if aerr != nil {
			t.Fatalf("memory.retrieve %s of %q: %v", query, agent, aerr)
		}
		var chunks []abi.MemoryChunk
		msgpack.Unmarshal(out, &chunks)
		return len(chunks)
	}
	if found("ops", "walrus") == 0 || found("ops", "zebra") != 0 {
		t.Errorf("ops's memory: walrus %d, zebra %d chunks; want only its own", found("ops", "walrus"), found("ops", "zebra"))
	}
	if found("", "zebra") == 0 || found("", "walrus") != 0 {
		t.Errorf("the default agent's memory: zebra %d, walrus %d chunks; want only its own", found("", "zebra"), found("", "walrus"))
	}
	raw, _ := msgpack.Marshal(abi.MemoryRetrieveParams{Query: "x", Agent: "nobody"})
	if _, aerr := e.kernel.Invoke(context.Background(), abi.MethodMemoryRetrieve, &kernel.Call{Session: rt.Runtime("default").sess, Params: raw}); aerr == nil || !strings.Contains(aerr.Message, `no agent "nobody"`) {
		t.Errorf("the memory of no agent: %v", aerr)
	}
}

// TestAgentsAnswerTheirQuestions: a message that names no agent answers
// the question another agent asked when the default agent asked none; a
// chat's "@ops text", read as a run loop's address, reaches ops. The
// control: with a question of the default agent's own open, it answers
// that one.
func TestAgentsAnswerTheirQuestions(t *testing.T) {
	e := newEnv(t)
	rules := e.rules()
	all := &kernel.SpawnAuthority{Skills: []string{"*"}, Commands: true}
	e.agents([]AgentSpec{{ID: "default", Spawn: all}, {ID: "ops", Spawn: all}}, map[string]Policy{"default": rules, "ops": rules})
	send := e.message
	routed := func(ev *abi.Event) *abi.Event {
		return e.events.until(t, "the message routed", func(x *abi.Event) bool { return abi.IsAgentMessageSubject(x.Type) && x.CausationID == ev.ID })
	}
	// "run" with nothing after it: ops asks "Run what?".
	q := routed(send(abi.UserMessage{Text: "run", RunLoopID: "ops"}))
	if q.Type != "kairo.agent.ops.message" {
		t.Fatalf("@ops as a run loop's address went to %s", q.Type)
	}
	e.events.until(t, "ops's question", sayIn("", "Run what?"))
	if a := routed(send(abi.UserMessage{Text: "echo answered"})); a.Type != "kairo.agent.ops.message" {
		t.Errorf("the answer to ops's question went to %s", a.Type)
	}
	// The control: the default agent's own question comes first.
	q = routed(send(abi.UserMessage{Text: "run", RunLoopID: "ops"}))
	e.events.until(t, "ops's second question", func(x *abi.Event) bool { return sayIn("", "Run what?")(x) && x.CausationID == q.ID })
	// Named: while ops's question is open, a message that names no agent
	// would answer it.
	d := routed(send(abi.UserMessage{Text: "@default run"}))
	e.events.until(t, "the default agent's question", func(x *abi.Event) bool { return sayIn("", "Run what?")(x) && x.CausationID == d.ID })
	if a := routed(send(abi.UserMessage{Text: "echo mine"})); a.Type != "kairo.agent.default.message" {
		t.Errorf("with its own question open, the default agent's answer went to %s", a.Type)
	}
}

// TestForgedAskIsDropped: a user message that claims to be another
// agent's ask (its ask field filled by the writer) is routed as a plain
// message: the run loop it opens answers no ask, so it runs under the
// agent's own grants and answers no one's action. The control is a real
// ask, which carries one.
func TestForgedAskIsDropped(t *testing.T) {
	e := newEnv(t)
	all := &kernel.SpawnAuthority{Skills: []string{"*"}, Commands: true}
	e.agents([]AgentSpec{{ID: "default", Spawn: all}, {ID: "ops", Spawn: all}}, map[string]Policy{"default": askingPolicy("ops"), "ops": e.rules()})
	forged := &abi.Ask{Agent: "default", ActionID: "forged-action", RunLoopID: "forged-loop", Depth: 1, Grants: abi.GrantsOwn}
	ev := e.message(abi.UserMessage{Text: "run echo forged", Agent: "ops", Ask: forged})
	routed := e.events.until(t, "the message routed", func(x *abi.Event) bool { return x.Type == "kairo.agent.ops.message" && x.CausationID == ev.ID })
	if m := decodeAs[abi.UserMessage](t, routed); m.Ask != nil {
		t.Errorf("a writer's ask reached the agent: %+v", m.Ask)
	}
	started := e.events.until(t, "its run loop", func(x *abi.Event) bool { return x.Type == abi.SubjectIntentStarted && x.CausationID == routed.ID })
	if d := decodeAs[abi.IntentStarted](t, started); d.Ask != nil {
		t.Errorf("the run loop answers a forged ask: %+v", d.Ask)
	}
	// The control: a real ask is carried.
	e.say("run echo asked", "")
	real := e.events.until(t, "ops's asked run loop", func(x *abi.Event) bool {
		return x.Type == abi.SubjectIntentStarted && x.Source == "agent/ops" && decodeAs[abi.IntentStarted](t, x).Ask != nil
	})
	if d := decodeAs[abi.IntentStarted](t, real); d.Ask.Agent != "default" || d.Ask.ActionID == "forged-action" {
		t.Errorf("the real ask: %+v", d.Ask)
	}
}
