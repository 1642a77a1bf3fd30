package abi

// AgentReplayParams are the params of agent.replay ([MethodAgentReplay]):
// the run loop whose recorded decisions the policy makes again. It answers
// an [AgentReplayReport].
type AgentReplayParams struct {
	RunLoop string `msgpack:"runLoop"`
}

// AgentReplayReport is what a replay found: agent.replay's result.
type AgentReplayReport struct {
	RunLoop string `msgpack:"runLoop"`
	Goal    string `msgpack:"goal,omitempty"`
	// Decisions counts the ticks handed to the policy again, from
	// FirstTick to LastTick.
	Decisions int    `msgpack:"decisions"`
	FirstTick uint64 `msgpack:"firstTick"`
	LastTick  uint64 `msgpack:"lastTick"`
	// Actions and Thoughts count what was compared; Answers the recorded
	// model answers handed back.
	Actions  int `msgpack:"actions"`
	Thoughts int `msgpack:"thoughts"`
	Answers  int `msgpack:"answers"`
	// Unrecorded counts the ticks that decided in the run loop but whose
	// record the log lacks (the daemon died as it decided): not replayed.
	Unrecorded int `msgpack:"unrecorded,omitempty"`
	// Divergence is the first difference; nil when the policy decided as
	// recorded.
	Divergence *AgentReplayDivergence `msgpack:"divergence,omitempty"`
}

// AgentReplayDivergence is where a replay first decided otherwise.
type AgentReplayDivergence struct {
	Tick     uint64 `msgpack:"tick"`
	Decision int    `msgpack:"decision"` // 1-based, of Decisions
	What     string `msgpack:"what"`
}
