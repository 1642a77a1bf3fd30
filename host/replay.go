package host

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host/wasm"
	"github.com/kairo-os/kairo/internal/agent"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/manifests"
)

// registerReplay serves agent.replay from the daemon.
func (d *Daemon) registerReplay(home string, cfg manifests.Config) {
	d.kernel.Register(kernel.Method{
		Name:    abi.MethodAgentReplay,
		Summary: "re-run a run loop's decisions against its recording and report the first that differs",
		Handler: func(ctx context.Context, c *kernel.Call) (any, error) {
			var p abi.AgentReplayParams
			if err := c.Decode(&p); err != nil {
				return nil, err
			}
			evs, err := ReadLog(ctx, d.bus)
			if err != nil {
				return nil, err
			}
			rep, err := ReplayEvents(ctx, evs, d.host, home, cfg, p.RunLoop, d.tools.Definitions(), d.log)
			if err != nil {
				return nil, abi.Errorf(abi.CodeInvalidParams, "%v", err)
			}
			return rep, nil
		},
	})
}

// ReadLog reads every event of b's log.
func ReadLog(ctx context.Context, b *bus.Bus) ([]abi.Event, error) {
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

// ReplayEvents replays the run loop run from the log evs, with the
// policy plugin cfg names, loaded through h from the plugin folders of a
// daemon on home.
func ReplayEvents(ctx context.Context, evs []abi.Event, h *wasm.Host, home string, cfg manifests.Config, run string, defs []abi.Tool, log *slog.Logger) (*abi.AgentReplayReport, error) {
	a := cfg.Agent
	return agent.Replay(ctx, agent.ReplaySetup{
		Events: evs, RunLoop: run, Agent: a.ID, BargeIn: a.BargeIn,
		Skills: slices.Sorted(maps.Keys(FindSkills(cfg.SkillsPath(home), log))), Tools: defs,
		Host: h, Folders: PluginFolders(home, cfg), Builtins: builtinsOf(cfg, nil), Overrides: cfg.Plugins, Policy: a.Policy, Logger: log,
	})
}
