package abi

import (
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// The agent runtime's values: what a policy plugin is given each tick
// (Batch.Agent), what its actions carry, and the data of the events a run
// loop is made of. A run loop — a user's goal and everything done for it —
// is one correlation chain: its id is the correlationId of every event in it.

// The subjects of the agent runtime are in subjects.go.

// UserMessage is the data of kairo.user.message and kairo.agent.{id}.message.
type UserMessage struct {
	Text string `msgpack:"text"`
	// MessageID deduplicates: a message whose id was seen is dropped.
	MessageID string `msgpack:"messageId"`
	// RunLoopID joins the message to an open run loop explicitly.
	RunLoopID string `msgpack:"runLoopId,omitempty"`
	// Agent is the agent the message is for (the seed's targetAgentId):
	// empty, the router picks one (docs/RATIONALE.md#many-agents).
	Agent string `msgpack:"agent,omitempty"`
	// Ask, on a message one agent sent another (the tool agent.ask), says
	// which action of which agent asked: the run loop it opens answers
	// that action. The runtime that delivers it fills it in; a client's
	// is never believed.
	Ask *Ask `msgpack:"ask,omitempty"`
}

// ToolAgentAsk is the tool by which an agent asks another: its args are
// [AgentAskArgs], its result the asked agent's answer. The LLM policy
// offers it to the model as "agent_ask".
const ToolAgentAsk = "agent.ask"

// AgentAskArgs are the args of agent.ask, as JSON.
type AgentAskArgs struct {
	Agent string `json:"agent"`
	Text  string `json:"text"`
}

// Ask is a delegation: the asking agent, its action and run loop, how
// deep the chain of asks is, and whose grants bound what the asked agent
// does for it.
type Ask struct {
	Agent     string `msgpack:"agent"`
	ActionID  string `msgpack:"actionId"`
	RunLoopID string `msgpack:"runLoopId"`
	// Depth is 1 for an ask from a run loop a person started, one more
	// for each ask along the chain.
	Depth int `msgpack:"depth"`
	// Grants is GrantsIntersection or GrantsOwn.
	Grants string `msgpack:"grants"`
	// Within are the agents whose grants bound the asked run loop besides
	// the asked agent's own: the asker (unless Grants is GrantsOwn) and
	// whatever bounded the asker, so a chain of asks only narrows.
	Within []string `msgpack:"within,omitempty"`
}

// What bounds an asked agent's tool calls for the agent that asked.
const (
	// GrantsIntersection: what both agents' grants allow (the default).
	GrantsIntersection = "intersection"
	// GrantsOwn: the asked agent's own grants, because the operator's
	// configuration lets it act for the asking agent ([agents.ID] acts_for).
	GrantsOwn = "own"
)

// AgentRef is another agent a policy may ask (agent.ask).
type AgentRef struct {
	ID          string `msgpack:"id"`
	Description string `msgpack:"description,omitempty"`
}

// AgentInput is what a policy is given each tick beside the tick's
// observations ([Batch.Events]): Compose(x_t, m_{t-1}, t, Hz).
type AgentInput struct {
	Agent string  `msgpack:"agent"`
	Hz    float64 `msgpack:"hz"`
	// Memory is the agent's memory of what happened before, as text.
	Memory string `msgpack:"memory,omitempty"`
	// RunLoops are the open run loops, oldest first.
	RunLoops []RunLoopView `msgpack:"runLoops,omitempty"`
	// Skills are the binary skills the agent may run by name.
	Skills []string `msgpack:"skills,omitempty"`
	// Tools are the tools a tool_call action may name, in the OpenAI
	// function format: the kernel's, the skills', the tool plugins', the
	// MCP servers'.
	Tools []Tool `msgpack:"tools,omitempty"`
	// BargeIn is how a message that arrives while the policy decides is
	// handled: BargeInBoundary, BargeInQueue or BargeInPreempt.
	BargeIn string `msgpack:"bargeIn,omitempty"`
	// Agents are the other agents this one may ask (agent.ask), by id.
	Agents []AgentRef `msgpack:"agents,omitempty"`
}

// Barge-in settings: what happens to a user message that arrives while the
// policy is deciding (for a policy that waits for a model, until it has
// answered). It is never dropped and never answered "busy".
const (
	// BargeInBoundary delivers it at the next tick boundary, with
	// everything else observed since the last tick: the default.
	BargeInBoundary = "boundary"
	// BargeInQueue delivers messages one a tick, in order, each after the
	// policy has answered the one before.
	BargeInQueue = "queue"
	// BargeInPreempt makes a policy drop the decision in progress (a
	// model's answer still to come is ignored) and decide again with the
	// new message.
	BargeInPreempt = "preempt"
)

// RunLoopView is a run loop as a policy sees it: derived from the event log.
type RunLoopView struct {
	ID         string       `msgpack:"id"`
	Goal       string       `msgpack:"goal"`
	StartedAt  time.Time    `msgpack:"startedAt"`
	Iterations int          `msgpack:"iterations"`
	Actions    []ActionView `msgpack:"actions,omitempty"`
	// Messages are the user's messages in this run loop, oldest first.
	Messages []string `msgpack:"messages,omitempty"`
	// Interrupted: the daemon stopped while actions of the run loop ran;
	// they were ended, the user was told, and the run loop waits for the
	// user (nothing in it runs until a new action).
	Interrupted bool `msgpack:"interrupted,omitempty"`
}

// ActionView is one action of a run loop and what became of it.
type ActionView struct {
	ID     string `msgpack:"id"`
	Type   string `msgpack:"type"`
	Tool   string `msgpack:"tool,omitempty"`
	Args   string `msgpack:"args,omitempty"` // JSON
	Text   string `msgpack:"text,omitempty"`
	Status string `msgpack:"status"` // an Action* status
	// ProcessID is the process the action spawned, if any.
	ProcessID string    `msgpack:"processId,omitempty"`
	Progress  string    `msgpack:"progress,omitempty"` // the last progress event's text
	Result    string    `msgpack:"result,omitempty"`   // a short form of the result or the error
	StartedAt time.Time `msgpack:"startedAt"`
	EndedAt   time.Time `msgpack:"endedAt,omitempty"`
}

// [Action] statuses, derived from events: an action without its result is in
// progress.
const (
	StatusInProgress  = "in_progress"
	StatusDone        = "done"
	StatusFailed      = "failed"
	StatusCanceled    = "canceled"
	StatusInterrupted = "interrupted" // the daemon died while it ran
)

// ActionData is the data of a policy's [Action] by type: Text for say and
// query, Tool and Args for tool_call, RunLoopID and Reason for cancel.
type ActionData struct {
	Text      string `msgpack:"text,omitempty"`
	Tool      string `msgpack:"tool,omitempty"`
	Args      string `msgpack:"args,omitempty"` // JSON object, as in OpenAI's format
	RunLoopID string `msgpack:"runLoopId,omitempty"`
	Reason    string `msgpack:"reason,omitempty"`
	// Done on a say closes its run loop once nothing in it runs.
	Done bool `msgpack:"done,omitempty"`
	// Keep on a cancel ends the run loop's processes — each action in
	// flight gets its canceled result — but keeps the run loop open: the
	// actions after it in the same answer continue it, once the processes
	// are gone (a change of parameters is an iteration, not a new task).
	Keep bool `msgpack:"keep,omitempty"`
	// Approval, on a tool call the runtime makes itself, names the approved
	// on-deny approval it re-runs a refused call with; the runtime clears
	// it on a policy's actions.
	Approval string `msgpack:"approval,omitempty"`
}

// ActionEvent is the data of kairo.agent.action. The event's id is the
// actionId.
type ActionEvent struct {
	Type string `msgpack:"type"`
	ActionData
	Tick uint64 `msgpack:"tick,omitempty"`
	// For, on a tool call of a run loop another agent asked for, is that
	// ask: whose it is and whose grants the call runs under.
	For *Ask `msgpack:"for,omitempty"`
}

// Observation is the data of kairo.observation.
type Observation struct {
	Kind string `msgpack:"kind"` // "system_event", "timer"
	Name string `msgpack:"name"` // what happened: the subject, the timer
	Text string `msgpack:"text,omitempty"`
	// Agent is the agent it is for; empty for every agent.
	Agent string `msgpack:"agent,omitempty"`
}

// TerminalInput is the data of kairo.input.terminal: one line as typed.
type TerminalInput struct {
	Text      string `msgpack:"text"`
	MessageID string `msgpack:"messageId"`
	Agent     string `msgpack:"agent,omitempty"`
}

// MethodClockWait answers at a time to come: how a plugin sets a timer.
const MethodClockWait = "clock.wait"

// ClockWaitParams are the params of clock.wait.
type ClockWaitParams struct {
	Until time.Time `msgpack:"until"`
}

// ClockWaitResult is its result.
type ClockWaitResult struct {
	Now time.Time `msgpack:"now"`
}

// TickRecord is the data of kairo.agent.tick: enough of a policy's tick to
// hand it the same batch again. The runtime records a tick whose batch held
// observations or call results, or whose reply said something; a tick with
// none of these (a heartbeat answered with a noop) changes nothing and is
// not recorded.
type TickRecord struct {
	Tick uint64    `msgpack:"tick"`
	At   time.Time `msgpack:"at"`
	Hz   float64   `msgpack:"hz"`
	// Seq is the last event the agent's state held when the tick began:
	// folding the log up to it gives the run loops the policy saw.
	Seq uint64 `msgpack:"seq"`
	// Pending are the agent's own events the state held beyond Seq: applied
	// as they were published, not yet back from the bus.
	Pending []string `msgpack:"pending,omitempty"`
	// Observed are the ids of the events of x_t, in order.
	Observed []string `msgpack:"observed,omitempty"`
	// Results counts the answers to the policy's earlier calls that the
	// batch carried.
	Results int `msgpack:"results,omitempty"`
	// Memory is the memory the policy was shown, recorded when it differs
	// from the last recorded tick's (MemoryChanged).
	Memory        string `msgpack:"memory,omitempty"`
	MemoryChanged bool   `msgpack:"memoryChanged,omitempty"`
}

// Thought is the data of kairo.agent.thought.
type Thought struct {
	Text string `msgpack:"text"`
	Tick uint64 `msgpack:"tick,omitempty"`
}

// ToolInvoke is the data of kairo.tool.invoke; causationId is the action.
type ToolInvoke struct {
	ActionID string `msgpack:"actionId"`
	Tool     string `msgpack:"tool"`
	Args     string `msgpack:"args,omitempty"`
}

// ToolResultEvent is the data of kairo.tool.result: every tool call gets one,
// a canceled or interrupted one too.
type ToolResultEvent struct {
	ActionID string             `msgpack:"actionId"`
	Tool     string             `msgpack:"tool"`
	Status   string             `msgpack:"status"` // done, failed, canceled, interrupted
	Result   msgpack.RawMessage `msgpack:"result,omitempty"`
	Error    string             `msgpack:"error,omitempty"`
	Duration time.Duration      `msgpack:"duration"`
	// ProcessID is set when the tool started a process; the action is in
	// progress until that process's exit.
	ProcessID string `msgpack:"processId,omitempty"`
}

// IntentStarted is the data of kairo.intent.started: a run loop opens.
type IntentStarted struct {
	RunLoopID     string `msgpack:"runLoopId"`
	Agent         string `msgpack:"agent"`
	Goal          string `msgpack:"goal"`
	MessageID     string `msgpack:"messageId,omitempty"`
	MaxIterations int    `msgpack:"maxIterations,omitempty"`
	// Ask: the run loop answers another agent's ask.
	Ask *Ask `msgpack:"ask,omitempty"`
}

// IntentEnded is the data of kairo.intent.ended.
type IntentEnded struct {
	RunLoopID string `msgpack:"runLoopId"`
	Status    string `msgpack:"status"` // done, canceled, max_iterations, failed
	Summary   string `msgpack:"summary,omitempty"`
}

// Note is the data of kairo.agent.note: a milestone of a run loop, such as a
// finished process — how process output reaches memory.
type Note struct {
	RunLoopID string        `msgpack:"runLoopId"`
	ProcessID string        `msgpack:"processId,omitempty"`
	Argv      []string      `msgpack:"argv,omitempty"`
	Status    string        `msgpack:"status"`
	ExitCode  *int          `msgpack:"exitCode,omitempty"`
	Duration  time.Duration `msgpack:"duration,omitempty"`
	LastLines []string      `msgpack:"lastLines,omitempty"`
	Artifacts []string      `msgpack:"artifacts,omitempty"`
	Text      string        `msgpack:"text,omitempty"`
}

// RunSummary is one run loop as agent.runs lists it.
type RunSummary struct {
	ID         string    `msgpack:"id"`
	Agent      string    `msgpack:"agent"`
	Host       string    `msgpack:"host,omitempty"` // the kairo whose agent runs it, when several share a store
	Goal       string    `msgpack:"goal"`
	Status     string    `msgpack:"status"` // "open", "interrupted" (open, waiting for the user), or how it ended
	StartedAt  time.Time `msgpack:"startedAt"`
	EndedAt    time.Time `msgpack:"endedAt,omitempty"`
	Iterations int       `msgpack:"iterations"`
	Actions    int       `msgpack:"actions"`
	InProgress int       `msgpack:"inProgress"`
	// Conversation: it ended done having called no tool — the agent only
	// answered ("help", "stop it" with nothing running, a question). It is
	// a run loop like any other in the log, and replays as one; listings
	// leave it out unless asked for all.
	Conversation bool `msgpack:"conversation,omitempty"`
	// StartSeq is the seq of its kairo.intent.started: its events come
	// after it.
	StartSeq uint64 `msgpack:"startSeq,omitempty"`
	// Ask: the run loop answers another agent's ask.
	Ask *Ask `msgpack:"ask,omitempty"`
}

// AgentsResult answers agent.list: the agents kairo up runs, the default
// one first.
type AgentsResult struct {
	Agents []AgentInfo `msgpack:"agents"`
}

// AgentInfo is one agent: its configuration and its open run loops.
type AgentInfo struct {
	ID          string `msgpack:"id"`
	Default     bool   `msgpack:"default,omitempty"`
	Policy      string `msgpack:"policy"`
	Description string `msgpack:"description,omitempty"`
	// Grants are what its tool calls may start.
	Grants AgentGrants `msgpack:"grants"`
	// ActsFor are the agents it may act for with its own grants.
	ActsFor []string `msgpack:"actsFor,omitempty"`
	// Memory is the agent whose memory it uses ("" none).
	Memory string `msgpack:"memory,omitempty"`
	Open   int    `msgpack:"open"`
}

// AgentGrants are an agent's grants ([agent.grants]).
type AgentGrants struct {
	Skills   []string `msgpack:"skills,omitempty"`
	Commands bool     `msgpack:"commands,omitempty"`
	Folders  []string `msgpack:"folders,omitempty"`
	Hosts    []string `msgpack:"hosts,omitempty"`
}

// RunsParams is agent.runs: a page of the newest Limit run loops (0: 50,
// at most MaxRunsPage), open ones only with Open, conversations only with
// All; Before (a RunsResult's Next) continues a listing where its last
// page ended. ID, when given, asks for the run loops whose id is ID or
// ends with it, old ones too.
type RunsParams struct {
	Limit  int    `msgpack:"limit,omitempty"`
	Open   bool   `msgpack:"open,omitempty"`
	All    bool   `msgpack:"all,omitempty"`
	Before uint64 `msgpack:"before,omitempty"`
	ID     string `msgpack:"id,omitempty"`
	// Agent, when given, asks for that agent's run loops only.
	Agent string `msgpack:"agent,omitempty"`
}

// MaxRunsPage bounds a page of agent.runs.
const MaxRunsPage = 1000

// RunsResult answers agent.runs, newest first. Next, when not 0, is the
// Before of the next page: older run loops may follow.
type RunsResult struct {
	Runs []RunSummary `msgpack:"runs"`
	Next uint64       `msgpack:"next,omitempty"`
}

// AgentError is the data of kairo.agent.error ([SubjectAgentError]): a
// tick whose policy failed or answered what the runtime cannot carry out;
// the tick is then a noop. A failure that repeats on every tick is
// reported at once, then with pauses that double: Suppressed counts the
// failures of its kind not reported since the last report.
type AgentError struct {
	Tick       uint64 `msgpack:"tick"`
	Error      string `msgpack:"error"`
	Suppressed int    `msgpack:"suppressed,omitempty"`
}

// SecretUse is the data of kairo.secret.used: the process that was given
// a secret, the secret's name and how it was given ("env DEPLOY_TOKEN",
// "file $KAIRO_SECRETS/ca-key", "param token") — never its value.
type SecretUse struct {
	ProcessID string `msgpack:"processId"`
	Skill     string `msgpack:"skill,omitempty"`
	Name      string `msgpack:"name"`
	As        string `msgpack:"as"`
}
