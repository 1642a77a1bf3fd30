package agent

import (
	"fmt"

	"github.com/kairo-os/kairo/abi"
)

// overCap says why the tool call after calls others of the same decision
// may not run in run loop loop, or "" when it may: a decision carries out
// at most MaxToolCalls calls, and none once its run loop has used up its
// iterations (each call counts as one).
func (r *Runtime) overCap(loop string, calls int) string {
	if calls >= r.cfg.MaxToolCalls {
		return fmt.Sprintf("refused: at most %d tool calls per decision ([agent] max_tool_calls)", r.cfg.MaxToolCalls)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.st.loops[loop]; l != nil && l.iterations >= max(l.maxIter, 1) {
		return fmt.Sprintf("refused: the task has used its %d steps ([agent] max_iterations); each tool call is one", l.maxIter)
	}
	return ""
}

// refusals are the tool calls of one decision that were not run, by why
// and where; they are reported as one result each, with the count, not
// one per call.
type refusals struct {
	list []refusal
}

type refusal struct {
	loop, cause, why string
	tools            []string // the first few, for the message
	n                int
}

func (f *refusals) add(loop, cause, tool, why string) {
	for i := range f.list {
		if x := &f.list[i]; x.loop == loop && x.why == why {
			x.n++
			if len(x.tools) < 4 {
				x.tools = append(x.tools, tool)
			}
			return
		}
	}
	f.list = append(f.list, refusal{loop: loop, cause: cause, why: why, tools: []string{tool}, n: 1})
}

// refuse publishes a failed kairo.tool.result for each kind of refusal of
// the decision, which the policy observes as it does any failed tool: the
// model reads why its calls did not run.
func (r *Runtime) refuse(f *refusals) {
	for _, x := range f.list {
		tool := x.tools[0]
		msg := fmt.Sprintf("%s; %d call(s) were not run", x.why, x.n)
		if len(x.tools) > 1 || x.n > 1 {
			msg += fmt.Sprintf(" (%s", x.tools[0])
			for _, t := range x.tools[1:] {
				msg += ", " + t
			}
			if x.n > len(x.tools) {
				msg += ", …"
			}
			msg += ")"
		}
		r.log.Warn("tool calls refused", "runLoop", x.loop, "count", x.n, "why", x.why)
		ev := r.emit(&abi.Event{Type: abi.SubjectToolResult, CorrelationID: x.loop, CausationID: x.cause},
			abi.ToolResultEvent{Tool: tool, Status: abi.StatusFailed, Error: msg})
		r.mu.Lock()
		r.obs = append(r.obs, *ev)
		r.mu.Unlock()
	}
}
