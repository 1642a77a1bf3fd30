package host

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/agent"
	"github.com/kairo-os/kairo/internal/memory"
	"github.com/kairo-os/kairo/internal/tools"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/manifests"
)

// openMemory opens the long-term memory [memory] describes for the agent
// a: its own file, the one of the agent it shares, or none. A file two
// agents share is opened once.
func (d *Daemon) openMemory(home string, cfg manifests.Config, a manifests.AgentConfig) (*agent.Memory, error) {
	m := cfg.Memory
	mc := &agent.Memory{KeepReasoning: m.KeepReasoning, Recall: m.Recall}
	path := cfg.AgentMemoryPath(home, a)
	if m.Recall == 0 || path == "" {
		mc.Recall = -1 // none
	}
	if cfg.LLM.Configured() {
		mc.ShortTerm.Summarizer = agent.LLMSummarizer{Chat: d.llm}
	}
	if path == "" {
		return mc, nil
	}
	if store := d.memories[path]; store != nil {
		mc.Store = store
		return mc, nil
	}
	opts := memory.Config{KeepReasoning: m.KeepReasoning, Logger: d.log}
	if e := m.Embeddings; e.BaseURL != "" {
		emb, err := memory.NewOpenAIEmbedder(memory.OpenAIConfig{BaseURL: e.BaseURL, Model: e.Model, APIKey: os.Getenv(e.APIKeyEnv), Dimensions: e.Dimensions})
		if err != nil {
			return nil, fmt.Errorf("[memory.embeddings]: %w", err)
		}
		opts.Embedder = emb
	}
	store, err := memory.Open(path, opts)
	if err != nil {
		return nil, fmt.Errorf("open the memory of agent %s: %w", a.ID, err)
	}
	if d.memories == nil {
		d.memories = map[string]*memory.Store{}
	}
	d.memories[path] = store
	mc.Store = store
	return mc, nil
}

// agentSpecs are the configured agents as the router knows them.
func agentSpecs(cfg manifests.Config) []agent.AgentSpec {
	var out []agent.AgentSpec
	for _, a := range cfg.AllAgents() {
		mem := a.ID
		switch a.Memory {
		case manifests.MemoryNone:
			mem = ""
		case "", manifests.MemoryOwn:
		default:
			mem = a.Memory
		}
		if !cfg.Memory.Enabled {
			mem = ""
		}
		out = append(out, agent.AgentSpec{ID: a.ID, Policy: a.Policy, Description: a.Description, ActsFor: a.ActsFor, Memory: mem,
			Spawn: &kernel.SpawnAuthority{Skills: a.Grants.Skills, Commands: a.Grants.Commands, Folders: a.Grants.Folders, Hosts: a.Grants.Hosts}})
	}
	return out
}

// startAgents starts every agent: [agent], then each [agents.ID]. Each
// rebuilds what it knows from the event log and starts ticking; they share
// the tools, the MCP servers and the router.
func (d *Daemon) startAgents(home string, cfg manifests.Config) error {
	all := cfg.AllAgents()
	for _, a := range all {
		key := "agent.policy"
		if a.ID != cfg.Agent.ID {
			key = "agents." + a.ID + ".policy"
		}
		if err := checkPolicy(key, a.Policy, d.plugins.List(), cfg.PluginsPath(home)); err != nil {
			return err
		}
	}
	if err := d.startTools(home, cfg, true); err != nil {
		return err
	}
	reg := d.tools
	d.startMCP(cfg)
	router, err := agent.NewRouter(cfg.Agent.ID, agentSpecs(cfg), cfg.Router.MaxAskDepth, cfg.Router.MaxAsks)
	if err != nil {
		return err
	}
	d.router = router
	for _, a := range all {
		mem, err := d.openMemory(home, cfg, a)
		if err != nil {
			return err
		}
		spec, _ := router.Spec(a.ID)
		r, err := agent.New(agent.Config{
			Tools: reg, Memory: mem, Router: router,
			Kernel: d.kernel, Policy: agent.PluginPolicy(d.plugins, a.Policy), Agent: a.ID,
			Hz: a.Hz, Overrun: agent.Overrun(a.Overrun), MaxIterations: a.MaxIterations,
			MaxToolCalls: a.MaxToolCalls, QueryBackoff: a.QueryBackoff, MinHz: a.MinHz, BargeIn: a.BargeIn, Spin: spinOf(a.TickSpinDuration()), Logger: d.log,
			Spawn: spec.Spawn,
			// The operator's [approval] rules and a skill's own [approval]:
			// the stricter of the two.
			Approval: func(tool string) string {
				return manifests.StricterApproval(cfg.Approval.ModeFor(tool), reg.ApprovalMode(tool))
			},
			Checkpoint: cfg.CheckpointPath(home, "agent-"+a.ID),
		})
		if err != nil {
			return err
		}
		if err := r.Start(); err != nil {
			return err
		}
		d.agents = append(d.agents, r)
		d.log.Info("agent up", "id", a.ID, "policy", a.Policy, "hz", a.Hz, "skills", len(reg.SkillNames()))
	}
	d.registerReplay()
	return nil
}

// checkPolicy refuses a start whose [agent] policy names no policy plugin
// that runs among the plugins of list: every tick would fail. The error
// names the key, the value and the policy plugins that run; dropIns is
// the folder a missing plugin goes in.
func checkPolicy(key, name string, list []abi.PluginStatus, dropIns string) error {
	var named *abi.PluginStatus
	var choices []string
	for i := range list {
		p := &list[i]
		if p.Name == name {
			named = p
		}
		if p.State == abi.PluginRunning && slices.Contains(p.Kinds, abi.KindPolicy) {
			choices = append(choices, strconv.Quote(p.Name))
		}
	}
	var why string
	switch {
	case named == nil:
		why = fmt.Sprintf("%q names no installed plugin", name)
	case named.State != abi.PluginRunning:
		why = fmt.Sprintf("the policy plugin %q did not start (%s%s)", name, named.State, colon(named.Error))
	case !slices.Contains(named.Kinds, abi.KindPolicy):
		why = fmt.Sprintf("the plugin %q is not a policy (it is of kind %s)", name, strings.Join(named.Kinds, ", "))
	default:
		return nil
	}
	slices.Sort(choices)
	table, _ := strings.CutSuffix(key, ".policy")
	setting := "[" + table + "] policy" // "[agent] policy", "[agents.ops] policy"
	fix := "no policy plugin runs: install one in " + dropIns
	switch len(choices) {
	case 0:
	case 1:
		fix = "the one policy plugin that runs is " + choices[0] + ": set " + setting + " to it in kairo.toml"
	default:
		fix = "the policy plugins that run are " + strings.Join(choices, ", ") + ": set " + setting + " to one of them in kairo.toml"
	}
	if named == nil && len(choices) > 0 {
		fix += ", or install " + strconv.Quote(name) + " in " + dropIns
	}
	return &manifests.Error{Key: key, Msg: why + "; " + fix}
}

// colon is ": s", or "" for no s.
func colon(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// startTools starts the tool registry: with serve, the daemon's, whose
// kernel methods are registered, which calls the plugins' tools and
// follows the skills folder; without, a replay's, which knows the skills
// installed now.
func (d *Daemon) startTools(home string, cfg manifests.Config, serve bool) error {
	tc := tools.Config{Kernel: d.kernel, Logger: d.log}
	if d.plugins != nil {
		tc.Plugins = d.plugins
	}
	if serve {
		tc.ResultDir = filepath.Join(home, "results")
	} else {
		// A replay writes nothing to the data folder: its large results,
		// if any, go to a temp folder the registry removes.
		tc.Skills = findSkills(cfg.SkillsPath(home), d.log)
	}
	reg, err := tools.New(tc)
	if err != nil {
		return err
	}
	if serve {
		reg.Register()
		// The skills folder, followed as the plugins folder is: the
		// registry tells the kernel and the agent which skills are
		// installed now.
		if err := reg.WatchSkills(tools.SkillsFolder{Dir: cfg.SkillsPath(home), Stage: skillsStage(d.launcher)}); err != nil {
			reg.Close()
			return err
		}
	}
	d.tools = reg
	return nil
}

// skillsStage is where the daemon copies the installed skills for the
// sandboxes to run: as root they run as uids that may not pass through the
// home (mode 0700), so the copies go beside the workspaces, on a path they
// may pass. "" runs the skills in place: the sandboxes run as the daemon's
// own uid, or not at all.
func skillsStage(l proc.Launcher) string {
	if sl, ok := l.(*proc.Sandboxed); ok && os.Geteuid() == 0 && sl.Root != "" {
		return filepath.Join(sl.Root, "skills")
	}
	return ""
}

// installedSkills finds a skill of dir by name when it is asked for, so a
// skill added while the daemon runs is found, and one is found before the
// agent's tools are up.
func installedSkills(dir string) func(name string) (string, bool) {
	quiet := slog.New(slog.DiscardHandler)
	return func(name string) (string, bool) {
		// Most skills live in a folder of their name: that one manifest
		// is read, not the whole folder's.
		if filepath.Base(name) == name && name != "." && name != ".." {
			path := filepath.Join(dir, name, "skill.toml")
			if sk, err := manifests.LoadSkill(path); err == nil && sk.Skill.Name == name {
				return path, true
			}
		}
		path, ok := findSkills(dir, quiet)[name]
		return path, ok
	}
}

// findSkills lists the skills of dir: each folder with a valid
// skill.toml, by the name its manifest gives. A broken one is logged and
// left out.
func findSkills(dir string, log *slog.Logger) map[string]string {
	skills := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			log.Warn("cannot read the skills folder", "dir", dir, "err", err)
		}
		return skills
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name(), "skill.toml")
		if !e.IsDir() {
			continue
		}
		sk, err := manifests.LoadSkill(path)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				log.Warn("a skill the agent cannot run", "manifest", path, "err", err)
			}
			continue
		}
		skills[sk.Skill.Name] = path
	}
	return skills
}

// spinOf is the runtime's Spin for a configured duration: 0 means none.
func spinOf(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
