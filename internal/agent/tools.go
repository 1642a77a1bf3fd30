package agent

import (
	"context"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/tools"
)

// Tools carries out the agent's tool calls. The runtime publishes
// kairo.tool.invoke before each call and kairo.tool.result, with what Call
// returned, after it. Call returns when ctx ends at the latest; a failed
// call is a result with Status failed and Error saying why, never a panic
// or a hang. An empty Status is done, or failed when Error is set.
type Tools interface {
	Call(ctx context.Context, c tools.Invocation) abi.ToolResultEvent
}

// Definer is Tools that can list its tools; the runtime shows them to the
// policy each tick.
type Definer interface {
	Definitions() []abi.Tool
}

// SkillNamer is Tools that knows the installed skills as they change; the
// runtime shows their names to the policy each tick, in place of
// Config.Skills'.
type SkillNamer interface {
	SkillNames() []string
}

var (
	_ Tools      = (*tools.Registry)(nil)
	_ Definer    = (*tools.Registry)(nil)
	_ SkillNamer = (*tools.Registry)(nil)
)
