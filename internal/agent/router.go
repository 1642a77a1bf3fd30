package agent

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
)

// Several agents run in one daemon, each its own principal: its grants,
// its run loops, its memory. The router is what they share: which agent a
// user message is for, and the asks between them. Each runtime follows
// the bus itself and routes the messages the router gives it; an ask goes
// from the asking runtime to the asked one in the process, and every hop
// is an event. See docs/RATIONALE.md#many-agents.

// AgentSpec is one agent as the others and the router know it.
type AgentSpec struct {
	ID          string
	Policy      string
	Description string
	// Spawn is its grants: what its tool calls may start.
	Spawn *kernel.SpawnAuthority
	// ActsFor are the agents it may act for with its own grants.
	ActsFor []string
	// Memory is the agent whose memory it uses ("" none).
	Memory string
}

// Router routes user messages to one agent of several and carries asks
// between them. Make one with NewRouter before the runtimes, and give it
// to each in Config.Router.
type Router struct {
	def      string
	specs    map[string]AgentSpec
	order    []string // the default agent first, then by id
	maxDepth int
	maxAsks  int

	mu     sync.Mutex
	agents map[string]*Runtime
}

// NewRouter returns the router of the agents specs, def being the one a
// message that names none goes to. maxDepth bounds a chain of asks,
// maxAsks the asks of one run loop (0: 3 and 8).
func NewRouter(def string, specs []AgentSpec, maxDepth, maxAsks int) (*Router, error) {
	if maxDepth <= 0 {
		maxDepth = 3
	}
	if maxAsks <= 0 {
		maxAsks = 8
	}
	rt := &Router{def: def, specs: map[string]AgentSpec{}, maxDepth: maxDepth, maxAsks: maxAsks, agents: map[string]*Runtime{}}
	for _, s := range specs {
		if _, dup := rt.specs[s.ID]; dup {
			return nil, fmt.Errorf("router: agent %q is configured twice", s.ID)
		}
		rt.specs[s.ID] = s
		rt.order = append(rt.order, s.ID)
	}
	if _, ok := rt.specs[def]; !ok {
		return nil, fmt.Errorf("router: the default agent %q is not among the agents", def)
	}
	slices.SortFunc(rt.order, func(a, b string) int {
		switch {
		case a == def:
			return -1
		case b == def:
			return 1
		}
		return strings.Compare(a, b)
	})
	return rt, nil
}

// soloRouter is the router of a runtime configured alone.
func soloRouter(cfg *Config) *Router {
	rt, _ := NewRouter(cfg.Agent, []AgentSpec{{ID: cfg.Agent, Spawn: cfg.Spawn}}, 0, 0)
	return rt
}

// Default is the agent a message that names none goes to.
func (rt *Router) Default() string { return rt.def }

// IDs are the agents, the default one first.
func (rt *Router) IDs() []string { return slices.Clone(rt.order) }

// Spec is the agent id's configuration.
func (rt *Router) Spec(id string) (AgentSpec, bool) {
	s, ok := rt.specs[id]
	return s, ok
}

// Runtime is the running agent id, nil before it started or when there is
// none.
func (rt *Router) Runtime(id string) *Runtime {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.agents[id]
}

func (rt *Router) add(r *Runtime) {
	rt.mu.Lock()
	rt.agents[r.cfg.Agent] = r
	rt.mu.Unlock()
}

func (rt *Router) remove(r *Runtime) {
	rt.mu.Lock()
	if rt.agents[r.cfg.Agent] == r {
		delete(rt.agents, r.cfg.Agent)
	}
	rt.mu.Unlock()
}

// Pick is the agent a user message is for, and its text without the
// address: the agent it names (targetAgentId), else the one its text
// starts with ("@ops run make", "ops: run make"), else the default
// agent. known is false when it names an agent that does not exist; the
// message then reaches none, and the default agent says so.
//
// "@ID" always addresses; "ID:" and "ID," only an agent that exists, so a
// message that merely starts with a word and a colon goes to the default
// agent whole.
func (rt *Router) Pick(m *abi.UserMessage) (id, text string, known bool) {
	text = m.Text
	if m.Agent != "" {
		_, known = rt.specs[m.Agent]
		return m.Agent, text, known
	}
	if _, ok := rt.specs[m.RunLoopID]; ok {
		// "@ops text" read as a run loop's address by a chat that does
		// not know the agents (the terminal plugin): the agent's name.
		return m.RunLoopID, text, true
	}
	trimmed := strings.TrimSpace(text)
	if rest, ok := strings.CutPrefix(trimmed, "@"); ok {
		name, after, _ := strings.Cut(rest, " ")
		name = strings.TrimRight(name, ":,")
		if name != "" {
			_, known = rt.specs[strings.ToLower(name)]
			return strings.ToLower(name), strings.TrimSpace(after), known
		}
	}
	if i := strings.IndexAny(trimmed, ":,"); i > 0 {
		name := strings.ToLower(trimmed[:i])
		if _, ok := rt.specs[name]; ok && !strings.ContainsAny(name, " \t") {
			if rest := strings.TrimSpace(trimmed[i+1:]); rest != "" {
				return name, rest, true
			}
		}
	}
	return rt.def, text, true
}

// owner is the agent that routes m: the one Pick names, or the default
// agent for an agent that does not exist (it answers that).
func (rt *Router) owner(m *abi.UserMessage) string {
	id, _, known := rt.Pick(m)
	if !known {
		return rt.def
	}
	return id
}

// asking is the one running agent other than r with a question open (its
// run loop's last action a query), nil when none or several: a message
// that names no agent and follows that question answers it.
func (rt *Router) asking(r *Runtime) *Runtime {
	var found *Runtime
	for _, a := range rt.IDs() {
		o := rt.Runtime(a)
		if o == nil || o == r {
			continue
		}
		o.mu.Lock()
		q := o.st.question() != nil
		o.mu.Unlock()
		if q {
			if found != nil {
				return nil
			}
			found = o
		}
	}
	return found
}

// loopOwner is the running agent that has the run loop id (or the one
// whose id ends with it), nil for none.
func (rt *Router) loopOwner(id string) *Runtime {
	for _, a := range rt.IDs() {
		r := rt.Runtime(a)
		if r == nil {
			continue
		}
		r.mu.Lock()
		l := r.st.loopNamed(id)
		r.mu.Unlock()
		if l != nil {
			return r
		}
	}
	return nil
}

// unknownText answers a message for an agent that does not exist.
func (rt *Router) unknownText(id string) string {
	return fmt.Sprintf("There is no agent %q. The agents are %s: name one with `kairo send --agent ID`, or start the message with @ID.", id, rt.list())
}

func (rt *Router) list() string {
	quoted := make([]string, len(rt.order))
	for i, id := range rt.order {
		quoted[i] = fmt.Sprintf("%q", id)
	}
	return strings.Join(quoted, ", ")
}

// Others are the agents id may ask, as its policy sees them.
func (rt *Router) Others(id string) []abi.AgentRef {
	var out []abi.AgentRef
	for _, o := range rt.order {
		if o != id {
			out = append(out, abi.AgentRef{ID: o, Description: rt.specs[o].Description})
		}
	}
	return out
}

// authority is what a run loop of agent id may start: its own grants,
// narrowed by the grants of every agent an ask it answers is held to.
func (rt *Router) authority(id string, ask *abi.Ask) *kernel.SpawnAuthority {
	own := rt.specs[id].Spawn
	if ask == nil {
		return own
	}
	a := own
	for _, w := range ask.Within {
		s, ok := rt.specs[w]
		if !ok {
			// An agent no longer configured: nothing is granted for it.
			return &kernel.SpawnAuthority{}
		}
		a = kernel.IntersectAuthority(a, s.Spawn)
	}
	return a
}

// ask is what asking agent to answer, from run loop l of from, records:
// whose grants bound the asked run loop. Called under from's r.mu.
func (rt *Router) ask(from string, l *runLoop, actionID, to string) *abi.Ask {
	a := &abi.Ask{Agent: from, ActionID: actionID, RunLoopID: l.id, Depth: 1, Grants: abi.GrantsIntersection}
	var within []string
	if l.ask != nil {
		a.Depth = l.ask.Depth + 1
		within = l.ask.Within
	}
	if slices.Contains(rt.specs[to].ActsFor, from) {
		// The operator lets it act for the asker with its own grants; what
		// bounded the asker still bounds it.
		a.Grants = abi.GrantsOwn
		a.Within = slices.Clone(within)
		return a
	}
	a.Within = append(slices.Clone(within), from)
	slices.Sort(a.Within)
	a.Within = slices.Compact(a.Within)
	return a
}

// deliver hands an ask to the agent it is for; false when that agent does
// not run.
func (rt *Router) deliver(to string, ask *abi.Ask, text string) bool {
	r := rt.Runtime(to)
	if r == nil {
		return false
	}
	return r.receiveAsk(ask, text)
}

// answer hands the end of an asked run loop (cause, its
// kairo.intent.ended) back to the agent that asked.
func (rt *Router) answer(ask *abi.Ask, cause string, res abi.ToolResultEvent) {
	if r := rt.Runtime(ask.Agent); r != nil {
		r.answered(ask, cause, res)
	}
}
