package agent

import (
	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
)

// register adds the agent's methods to the kernel's table.
func (r *Runtime) register() {
	r.k.Register(kernel.Method{Name: abi.MethodAgentRuns, Summary: "the agent's run loops, newest first, with their state", Handler: r.runsMethod})
}
