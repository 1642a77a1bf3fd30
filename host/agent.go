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

// openMemory opens the long-term memory [memory] describes; nil when it is
// off.
func (d *Daemon) openMemory(home string, cfg manifests.Config) (*agent.Memory, error) {
	m := cfg.Memory
	mc := &agent.Memory{KeepReasoning: m.KeepReasoning, Recall: m.Recall}
	if m.Recall == 0 || !m.Enabled {
		mc.Recall = -1 // none
	}
	if cfg.LLM.Configured() {
		mc.ShortTerm.Summarizer = agent.LLMSummarizer{Chat: d.llm}
	}
	if !m.Enabled {
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
	store, err := memory.Open(cfg.MemoryPath(home), opts)
	if err != nil {
		return nil, fmt.Errorf("open the memory: %w", err)
	}
	d.memory, mc.Store = store, store
	return mc, nil
}

// startAgent starts the agent: it rebuilds what it knows from the event log
// and starts ticking.
func (d *Daemon) startAgent(home string, cfg manifests.Config) error {
	a := cfg.Agent
	if err := checkPolicy(a.Policy, d.plugins.List(), cfg.PluginsPath(home)); err != nil {
		return err
	}
	if err := d.startTools(home, cfg, true); err != nil {
		return err
	}
	reg := d.tools
	d.startMCP(cfg)
	mem, err := d.openMemory(home, cfg)
	if err != nil {
		return err
	}
	r, err := agent.New(agent.Config{
		Tools: reg, Memory: mem,
		Kernel: d.kernel, Policy: agent.PluginPolicy(d.plugins, a.Policy), Agent: a.ID,
		Hz: a.Hz, Overrun: agent.Overrun(a.Overrun), MaxIterations: a.MaxIterations,
		MaxToolCalls: a.MaxToolCalls, QueryBackoff: a.QueryBackoff, MinHz: a.MinHz, BargeIn: a.BargeIn, Spin: spinOf(a.TickSpinDuration()), Logger: d.log,
		Spawn: &kernel.SpawnAuthority{Skills: a.Grants.Skills, Commands: a.Grants.Commands, Folders: a.Grants.Folders},
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
	d.agent = r
	d.registerReplay()
	d.log.Info("agent up", "id", a.ID, "policy", a.Policy, "hz", a.Hz, "skills", len(reg.SkillNames()))
	return nil
}

// checkPolicy refuses a start whose [agent] policy names no policy plugin
// that runs among the plugins of list: every tick would fail. The error
// names the key, the value and the policy plugins that run; dropIns is
// the folder a missing plugin goes in.
func checkPolicy(name string, list []abi.PluginStatus, dropIns string) error {
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
	fix := "no policy plugin runs: install one in " + dropIns
	switch len(choices) {
	case 0:
	case 1:
		fix = "the one policy plugin that runs is " + choices[0] + ": set [agent] policy to it in kairo.toml"
	default:
		fix = "the policy plugins that run are " + strings.Join(choices, ", ") + ": set [agent] policy to one of them in kairo.toml"
	}
	if named == nil && len(choices) > 0 {
		fix += ", or install " + strconv.Quote(name) + " in " + dropIns
	}
	return &manifests.Error{Key: "agent.policy", Msg: why + "; " + fix}
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
