package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host"
	"github.com/kairo-os/kairo/host/agent"
	"github.com/kairo-os/kairo/host/tools"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/manifests"
)

// replayParams are the params of the daemon's agent.replay.
type replayParams struct {
	RunLoop string `msgpack:"runLoop"`
}

func runReplayRun(ctx context.Context, args []string) error {
	f := newFlags("replay", "kairo replay --run ID [--home DIR] [--config FILE]", `
Re-run a run loop's decisions against the log: the agent's policy plugin,
alone in a kernel of its own, is handed each recorded tick again, its
model answered from the recorded kairo.llm.response events, and what it
decides is compared with what it decided then. Nothing reaches the model,
the log or a process. Prints the first decision that differs and exits 1,
or says the run replayed as recorded.

With kairo up running on the data folder, the daemon replays; without, the
log is read from the data folder directly.`)
	run := f.String("run", "", "the run loop `ID` (or its end, as `kairo runs` shows it)")
	homeFlag := f.String("home", "", "the data folder `DIR` (default $KAIRO_HOME, else ./.kairo)")
	configFlag := f.String("config", "", "read `FILE` over the built-in defaults (default: kairo.toml in the data folder, if it exists)")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	if *run == "" {
		return &usageError{msg: "replay: give the run loop: kairo replay --run ID (`kairo runs` lists them)"}
	}
	home, err := dataFolder(*homeFlag)
	if err != nil {
		return err
	}
	var rep *agent.ReplayReport
	lock, err := lockHome(home)
	if err == nil {
		defer lock.Close()
		rep, err = replayOffline(ctx, home, *configFlag, *run)
	} else {
		rep, err = replayOnline(ctx, *run)
	}
	if err != nil {
		return err
	}
	return printReplay(os.Stdout, rep)
}

// replayOnline asks the running daemon.
func replayOnline(ctx context.Context, run string) (*agent.ReplayReport, error) {
	var rep agent.ReplayReport
	if err := callKernel(ctx, "agent.replay", replayParams{RunLoop: run}, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// replayOffline reads the data folder's log itself: no daemon runs on it.
func replayOffline(ctx context.Context, home, cfgPath, run string) (*agent.ReplayReport, error) {
	cfg, err := loadConfig(home, cfgPath)
	if err != nil {
		return nil, err
	}
	if cfg.Store.Kind == manifests.StoreMemory {
		return nil, errors.New("replay: the event store is kept in memory, so only the running daemon has the log: start kairo up and replay the run loop then")
	}
	path := cfg.StorePath(home)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("replay: no event log at %s: is --home the data folder kairo up ran on?", path)
	}
	store, err := bus.OpenSQLite(path, bus.SQLiteOptions{})
	if err != nil {
		return nil, err
	}
	b := bus.New(store, bus.Options{})
	defer b.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, err := host.New(host.Config{CacheDir: cfg.CachePath(home), Logger: log})
	if err != nil {
		return nil, err
	}
	defer h.Close(context.Background())
	// The tools the agent would have without its plugins and MCP servers,
	// which run only with the daemon.
	scratch := bus.New(bus.NewMemoryStore(16), bus.Options{})
	defer scratch.Close()
	k := kernel.New(scratch, kernel.Options{Logger: log})
	defer k.Close()
	reg, err := tools.New(tools.Config{Kernel: k, Skills: findSkills(cfg.SkillsPath(home), log), Logger: log})
	if err != nil {
		return nil, err
	}
	defer reg.Close()
	return replayRun(ctx, b, h, home, cfg, run, reg.Definitions(), log)
}

// replayRun replays run from the log of b with the policy plugin cfg names.
func replayRun(ctx context.Context, b *bus.Bus, h *host.Host, home string, cfg manifests.Config, run string, defs []abi.Tool, log *slog.Logger) (*agent.ReplayReport, error) {
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
	a := cfg.Agent
	return agent.Replay(ctx, agent.ReplaySetup{
		Events: evs, RunLoop: run, Agent: a.ID, BargeIn: a.BargeIn,
		Skills: slices.Sorted(maps.Keys(findSkills(cfg.SkillsPath(home), log))), Tools: defs,
		Host: h, Folders: pluginFolders(home, cfg), Overrides: cfg.Plugins, Policy: a.Policy, Logger: log,
	})
}

// registerReplay serves agent.replay from the daemon.
func (d *daemon) registerReplay(home string, cfg manifests.Config) {
	d.kernel.Register(kernel.Method{
		Name:    "agent.replay",
		Summary: "re-run a run loop's decisions against its recording and report the first that differs",
		Handler: func(ctx context.Context, c *kernel.Call) (any, error) {
			var p replayParams
			if err := c.Decode(&p); err != nil {
				return nil, err
			}
			rep, err := replayRun(ctx, d.bus, d.host, home, cfg, p.RunLoop, d.tools.Definitions(), d.log)
			if err != nil {
				return nil, abi.Errorf(abi.CodeInvalidParams, "%v", err)
			}
			return rep, nil
		},
	})
}

func printReplay(w io.Writer, rep *agent.ReplayReport) error {
	fmt.Fprintf(w, "run loop %s %q\n", termLine(rep.RunLoop), rep.Goal)
	fmt.Fprintf(w, "replayed %d decisions (ticks %d–%d): %d actions, %d thoughts, %d recorded model answers\n",
		rep.Decisions, rep.FirstTick, rep.LastTick, rep.Actions, rep.Thoughts, rep.Answers)
	if rep.Unrecorded > 0 {
		fmt.Fprintf(w, "not replayed: %d decisions whose tick the log does not record (the daemon stopped as it decided)\n", rep.Unrecorded)
	}
	if d := rep.Divergence; d != nil {
		fmt.Fprintf(w, "DIVERGED at tick %d (decision %d of %d): %s\n", d.Tick, d.Decision, rep.Decisions, termText(d.What))
		return exitCode(1)
	}
	fmt.Fprintln(w, "the policy decided as recorded")
	return nil
}
