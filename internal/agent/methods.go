package agent

import (
	"context"
	"slices"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
)

// register adds the agents' methods to the kernel's table: once, by the
// default agent, for all of them.
func (r *Runtime) register() {
	if r.cfg.Agent != r.router.Default() {
		return
	}
	rt := r.router
	r.k.Register(kernel.Method{Name: abi.MethodAgentRuns, Summary: "the agents' run loops, newest first, with their state", Handler: rt.runsMethod})
	r.k.Register(kernel.Method{Name: abi.MethodAgentList, Summary: "the agents: policy, description, grants, open run loops", Handler: rt.listMethod})
}

// runsMethod is agent.runs as the router serves it, for tests of one
// runtime.
func (r *Runtime) runsMethod(ctx context.Context, c *kernel.Call) (any, error) {
	return r.router.runsMethod(ctx, c)
}

// listMethod serves agent.list.
func (rt *Router) listMethod(context.Context, *kernel.Call) (any, error) {
	var res abi.AgentsResult
	for _, id := range rt.order {
		s := rt.specs[id]
		info := abi.AgentInfo{ID: id, Default: id == rt.def, Policy: s.Policy, Description: s.Description,
			ActsFor: slices.Clone(s.ActsFor), Memory: s.Memory}
		if a := s.Spawn; a != nil {
			info.Grants = abi.AgentGrants{Skills: slices.Clone(a.Skills), Commands: a.Commands, Folders: slices.Clone(a.Folders), Hosts: slices.Clone(a.Hosts)}
		}
		if r := rt.Runtime(id); r != nil {
			r.mu.Lock()
			info.Open = len(r.st.open)
			r.mu.Unlock()
		}
		res.Agents = append(res.Agents, info)
	}
	return res, nil
}
