package agent

import (
	"context"
	"slices"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
)

// register adds the agent's methods to the kernel's table.
func (r *Runtime) register() {
	r.k.Register(kernel.Method{Name: abi.MethodAgentRuns, Summary: "the agent's run loops, newest first, with their state", Handler: r.runsMethod})
}

func (r *Runtime) runsMethod(ctx context.Context, c *kernel.Call) (any, error) {
	var p abi.RunsParams
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	if p.Limit <= 0 {
		p.Limit = 50
	}
	r.mu.Lock()
	out := r.runs(nil, r.st, r.k.Bus.Host(), p)
	for host, st := range r.others {
		out = r.runs(out, st, host, p)
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b abi.RunSummary) int { return b.StartedAt.Compare(a.StartedAt) })
	if len(out) > p.Limit {
		out = out[:p.Limit]
	}
	return abi.RunsResult{Runs: out}, nil
}

// runs appends the run loops of st, host's, to out; the caller holds r.mu.
func (r *Runtime) runs(out []abi.RunSummary, st *state, host string, p abi.RunsParams) []abi.RunSummary {
	for _, l := range st.loops {
		conv := l.conversation()
		if p.Open && l.status != "" || conv && !p.All {
			continue
		}
		s := abi.RunSummary{ID: l.id, Agent: r.cfg.Agent, Host: host, Goal: l.goal, Status: l.status, StartedAt: l.started, EndedAt: l.ended,
			Iterations: l.iterations, Actions: len(l.actions), InProgress: len(l.inProgress()), Conversation: conv}
		switch {
		case s.Status != "":
		case l.waiting():
			s.Status = abi.StatusInterrupted
		default:
			s.Status = "open"
		}
		out = append(out, s)
	}
	return out
}
