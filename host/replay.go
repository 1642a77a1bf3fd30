package host

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host/wasm"
	"github.com/kairo-os/kairo/internal/agent"
	"github.com/kairo-os/kairo/internal/llm"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
)

// registerReplay serves agent.replay from the daemon.
func (d *Daemon) registerReplay() {
	d.kernel.Register(kernel.Method{
		Name:    abi.MethodAgentReplay,
		Summary: "re-run a run loop's decisions against its recording and report the first that differs",
		Handler: func(ctx context.Context, c *kernel.Call) (any, error) {
			var p abi.AgentReplayParams
			if err := c.Decode(&p); err != nil {
				return nil, err
			}
			rep, _, err := d.Replay(ctx, p.RunLoop)
			if err != nil {
				return nil, abi.Errorf(abi.CodeInvalidParams, "%v", err)
			}
			return rep, nil
		},
	})
}

// Replay re-runs the decisions of the run loop run (its id, or the end of
// it as `kairo runs` shows it) against the daemon's log: the agent's policy
// plugin, alone in a kernel of its own, is handed each recorded tick again,
// its model answered from the recorded answers, and what it decides is
// compared with what it decided then. It returns the report and the run
// loop's events. A [Full] daemon serves it as agent.replay; a [Replaying] one
// is started for it alone.
func (d *Daemon) Replay(ctx context.Context, run string) (*abi.AgentReplayReport, []abi.Event, error) {
	if d.engine == nil {
		return nil, nil, fmt.Errorf("host: replay: the daemon is not started, or runs in the %s mode", d.cfg.Mode)
	}
	evs, err := readLog(ctx, d.bus)
	if err != nil {
		return nil, nil, err
	}
	home, cfg := d.cfg.Home, d.cfg.Config
	// The run loop's agent, whose policy decided it.
	a := cfg.Agent
	if id := agent.LoopAgent(evs, run); id != "" {
		for _, c := range cfg.AllAgents() {
			if c.ID == id {
				a = c
			}
		}
	}
	// The other agents it was shown, as the router shows them.
	var others []abi.AgentRef
	if rt, err := agent.NewRouter(cfg.Agent.ID, agentSpecs(cfg), 0, 0); err == nil {
		others = rt.Others(a.ID)
	}
	r, err := agent.NewReplay(agent.ReplaySetup{
		Events: evs, RunLoop: run, Agent: a.ID, BargeIn: a.BargeIn,
		Skills: slices.Sorted(maps.Keys(findSkills(cfg.SkillsPath(home), d.log))), Tools: d.tools.Definitions(),
		Policy: a.Policy, Agents: others, Logger: d.log,
	})
	if err != nil {
		return nil, nil, err
	}
	rep, err := d.replayIn(ctx, r, a.Policy)
	if err != nil {
		return nil, nil, err
	}
	var loop []abi.Event
	for _, ev := range evs {
		if ev.CorrelationID == rep.RunLoop {
			loop = append(loop, ev)
		}
	}
	return rep, loop, nil
}

// replayIn runs r with the policy plugin loaded into a kernel of its own,
// over a store in memory: nothing the policy does reaches the real log or
// starts a process.
func (d *Daemon) replayIn(ctx context.Context, r *agent.Replay, policy string) (*abi.AgentReplayReport, error) {
	home, cfg := d.cfg.Home, d.cfg.Config
	b := bus.New(bus.NewMemoryStore(4096), bus.Config{})
	defer b.Close()
	k := kernel.New(b, kernel.Config{Logger: d.log})
	defer k.Close()
	llm.Register(k, r.Answers())
	for _, ev := range r.Grants() {
		if _, err := b.Publish(ctx, &ev); err != nil {
			return nil, err
		}
	}
	m := wasm.NewManager(wasm.ManagerConfig{
		Engine: d.engine, Kernel: k, Folders: pluginFolders(home, cfg), Builtins: builtinsOf(cfg, d.cfg.Builtins),
		Overrides: cfg.Plugins, Only: []string{policy}, Logger: d.log,
	})
	if err := m.Start(); err != nil {
		d.log.Warn("replay: the plugin folders are not watched", "err", err)
	}
	defer m.Stop()
	return r.Run(ctx, m)
}

// readLog reads every event of b's log.
func readLog(ctx context.Context, b *bus.Bus) ([]abi.Event, error) {
	var evs []abi.Event
	err := b.Replay(ctx, bus.Query{}, func(ev *abi.Event) error {
		c := *ev
		c.Data = append([]byte(nil), ev.Data...)
		evs = append(evs, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("replay: read the log: %w", err)
	}
	return evs, nil
}
