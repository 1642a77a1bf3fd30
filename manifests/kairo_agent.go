package manifests

import (
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// MemoryConfig is the [memory] table: what the agent remembers.
type MemoryConfig struct {
	// Enabled keeps a long-term memory of the run loops that ended.
	Enabled bool `toml:"enabled"`
	// Path is its SQLite file, relative to KAIRO_HOME.
	Path string `toml:"path"`
	// KeepReasoning stores the policy's thoughts too; off, only public
	// actions, results and summaries (seed 000 §4.2).
	KeepReasoning bool `toml:"keep_reasoning"`
	// Recall is how many chunks of earlier run loops a new one is given.
	Recall int `toml:"recall"`
	// Embeddings, when BaseURL is set, adds vector similarity to full-text
	// search.
	Embeddings EmbeddingsConfig `toml:"embeddings"`
}

// EmbeddingsConfig is [memory.embeddings]: an OpenAI-compatible
// /v1/embeddings endpoint.
type EmbeddingsConfig struct {
	BaseURL    string `toml:"base_url"`
	Model      string `toml:"model"`
	APIKeyEnv  string `toml:"api_key_env"`
	Dimensions int    `toml:"dimensions"`
}

// AgentConfig is the [agent] table, the default agent, and each
// [agents.ID] beside it.
type AgentConfig struct {
	ID     string `toml:"id"`     // routes kairo.agent.{id}.message
	Policy string `toml:"policy"` // the policy plugin's name
	// Description says what the agent is for, to the person who lists
	// the agents and to the agents that may ask it.
	Description string `toml:"description"`
	// ActsFor are the agents this one may act for with its own grants
	// when they ask it; for any other, what it does is held to what both
	// agents' grants allow.
	ActsFor []string `toml:"acts_for"`
	// Memory is "own" (a memory of its own run loops), "none", or the id
	// of another agent whose memory it shares.
	Memory string  `toml:"memory"`
	Hz     float64 `toml:"hz"`
	// Overrun is "skip" (drop late ticks) or "catch_up" (run them all).
	Overrun       string  `toml:"overrun"`
	MaxIterations int     `toml:"max_iterations"`
	MaxToolCalls  int     `toml:"max_tool_calls"` // per decision
	QueryBackoff  int     `toml:"query_backoff"`
	MinHz         float64 `toml:"min_hz"`
	// BargeIn is "boundary", "queue" or "preempt": see the defaults file.
	BargeIn string `toml:"barge_in"`
	// SkillsDir holds binary skills, each a folder with a skill.toml, that
	// the agent runs by name; relative to KAIRO_HOME.
	SkillsDir string `toml:"skills_dir"`
	// TickSpin is how long before each tick the loop stops trusting Go's
	// timers: it sleeps on the kernel's timer and spins for the last
	// 100 µs; "0s" for never.
	TickSpin string `toml:"tick_spin"`
	// Grants bound what the model's tool calls may start.
	Grants AgentGrants `toml:"grants"`
}

// AgentGrants is [agent.grants]: the agent's authority when it acts for a
// run loop, which is the model's. What it starts holds no more.
type AgentGrants struct {
	// Skills are the installed skills it may run by name ("*": all), each
	// under its own manifest's grants.
	Skills []string `toml:"skills"`
	// Commands lets it run programs of its choosing, under the default
	// profile.
	Commands bool `toml:"commands"`
	// Folders are where its commands may work (and write, as far as the
	// folder's owner lets the sandbox's uid) besides the workspaces Kairo
	// makes; absolute paths.
	Folders []string `toml:"folders"`
	// Hosts are the host names its commands may reach, through the
	// kernel's egress proxy ("api.github.com:443", "*.pypi.org", an IP
	// literal with its port); none: no network.
	Hosts []string `toml:"hosts"`
}

// RouterConfig is the [router] table: how user messages reach the agents
// and how far one agent may ask another.
type RouterConfig struct {
	// MaxAskDepth bounds a chain of asks (an agent asking one that asks
	// another…); MaxAsks the asks of one run loop.
	MaxAskDepth int `toml:"max_ask_depth"`
	MaxAsks     int `toml:"max_asks"`
}

// Agent memory settings besides another agent's id.
const (
	MemoryOwn  = "own"
	MemoryNone = "none"
)

// AllAgents is every agent kairo up runs: [agent] first, then
// [agents.ID] by id.
func (c *Config) AllAgents() []AgentConfig {
	out := []AgentConfig{c.Agent}
	for _, id := range slices.Sorted(maps.Keys(c.Agents)) {
		out = append(out, c.Agents[id])
	}
	return out
}

// AgentMemoryPath is the memory file of the agent a: [memory] path for
// the default agent, beside it with the agent's id for another ("memory.db"
// → "memory-ops.db"); the file of the agent it shares, when it does; ""
// for none.
func (c *Config) AgentMemoryPath(home string, a AgentConfig) string {
	if !c.Memory.Enabled || a.Memory == MemoryNone {
		return ""
	}
	if a.Memory != "" && a.Memory != MemoryOwn {
		if a.Memory == c.Agent.ID {
			return c.MemoryPath(home)
		}
		other, ok := c.Agents[a.Memory]
		if !ok {
			return ""
		}
		a = other
	}
	if a.ID == c.Agent.ID {
		return c.MemoryPath(home)
	}
	p := c.MemoryPath(home)
	ext := filepath.Ext(p)
	return strings.TrimSuffix(p, ext) + "-" + a.ID + ext
}

// fillAgents makes each [agents.ID] whole: its id is its table's name,
// and every key it leaves out has the built-in [agent] default — except
// its grants, which are none unless it lists them (deny by default).
func (c *Config) fillAgents(md toml.MetaData) {
	if len(c.Agents) == 0 {
		return
	}
	def := Default().Agent
	dv := reflect.ValueOf(def)
	t := dv.Type()
	for id, a := range c.Agents {
		av := reflect.ValueOf(&a).Elem()
		for i := range t.NumField() {
			key := strings.Split(t.Field(i).Tag.Get("toml"), ",")[0]
			switch key {
			case "id", "grants", "description", "acts_for":
				continue
			}
			if !md.IsDefined("agents", id, key) {
				av.Field(i).Set(dv.Field(i))
			}
		}
		a.ID = id
		c.Agents[id] = a
	}
}

// validateAgents checks [agents.ID] and [router]: each agent as [agent]
// is checked, no id twice, acts_for and memory naming agents that exist.
func (c *Config) validateAgents() []*Error {
	var errs []*Error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	known := map[string]bool{c.Agent.ID: true}
	for id := range c.Agents {
		known[id] = true
	}
	names := func() string {
		ids := slices.Sorted(maps.Keys(known))
		return `"` + strings.Join(ids, `", "`) + `"`
	}
	check := func(prefix string, a AgentConfig) {
		for i, other := range a.ActsFor {
			switch {
			case other == a.ID:
				bad(fmt.Sprintf("%s.acts_for[%d]", prefix, i), "%q is the agent itself; list the agents it may act for with its own grants", other)
			case !known[other]:
				bad(fmt.Sprintf("%s.acts_for[%d]", prefix, i), "%q names no agent; the agents are %s", other, names())
			}
		}
		switch m := a.Memory; {
		case m == "" || m == MemoryOwn || m == MemoryNone:
		case m == a.ID:
			bad(prefix+".memory", "%q is the agent itself; say \"own\"", m)
		case !known[m]:
			bad(prefix+".memory", "%q: want \"own\", \"none\" or the id of the agent whose memory it shares (%s)", m, names())
		default:
			shared := c.Agent
			if m != c.Agent.ID {
				shared = c.Agents[m]
			}
			if shared.Memory != "" && shared.Memory != MemoryOwn {
				bad(prefix+".memory", "%q does not keep a memory of its own (its memory is %q); name an agent whose memory is \"own\"", m, shared.Memory)
			}
		}
	}
	check("agent", c.Agent)
	for _, id := range slices.Sorted(maps.Keys(c.Agents)) {
		a := c.Agents[id]
		prefix := "agents." + id
		if id == c.Agent.ID {
			bad(prefix, "%q is the id of [agent], the default agent; give this agent another id, or configure the default one in [agent]", id)
			continue
		}
		a.ID = id
		errs = append(errs, a.validate(prefix)...)
		check(prefix, a)
	}
	if c.Router.MaxAskDepth < 1 || c.Router.MaxAskDepth > 16 {
		bad("router.max_ask_depth", "%d: want 1 to 16 asks in a chain, such as 3", c.Router.MaxAskDepth)
	}
	if c.Router.MaxAsks < 1 || c.Router.MaxAsks > 1024 {
		bad("router.max_asks", "%d: want 1 to 1024 asks a run loop may make, such as 8", c.Router.MaxAsks)
	}
	return errs
}

// TickSpinDuration is TickSpin parsed; valid once Validate passed.
func (a AgentConfig) TickSpinDuration() time.Duration {
	d, _ := time.ParseDuration(a.TickSpin)
	return d
}

// LLMConfig is the [llm] table: the OpenAI-compatible endpoint behind the
// host method llm.chat.
type LLMConfig struct {
	// BaseURL is the endpoint's API root, such as "https://api.openai.com/v1"
	// or "http://localhost:11434/v1" (Ollama). Empty: no LLM is configured,
	// and llm.chat says how to configure one.
	BaseURL string `toml:"base_url"`
	// Model is asked for when a request names none.
	Model string `toml:"model"`
	// APIKeyEnv names the environment variable that holds the API key; the
	// key itself never goes in the file.
	APIKeyEnv string `toml:"api_key_env"`
	// Timeout bounds each HTTP request, from sending it to the last token.
	Timeout string `toml:"timeout"`
	// MaxRetries is how many times a request that met a rate limit (429), a
	// server error (5xx) or a dropped connection is sent again.
	MaxRetries int `toml:"max_retries"`
	// Stream asks for the answer as server-sent events.
	Stream bool `toml:"stream"`
	// MaxResponseBytes caps the body of each answer, read no further.
	MaxResponseBytes Size `toml:"max_response_bytes"`
}

// TimeoutDuration is Timeout parsed; valid once Validate passed.
func (l LLMConfig) TimeoutDuration() time.Duration {
	d, _ := time.ParseDuration(l.Timeout)
	return d
}

// Configured reports whether an endpoint is set.
func (l LLMConfig) Configured() bool { return l.BaseURL != "" }

func (a *AgentConfig) validate(prefix string) []*Error {
	var errs []*Error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if a.ID == "" || len(a.ID) > maxSkillName || !skillNameRE.MatchString(a.ID) {
		bad(prefix+".id", "%q is not an agent id: use lower-case letters, digits, \"_\" and \"-\", such as \"default\"", a.ID)
	}
	if a.Policy == "" || !skillNameRE.MatchString(a.Policy) {
		bad(prefix+".policy", "%q is not a plugin name; name the policy plugin, such as \"rules\"", a.Policy)
	}
	if !(a.Hz > 0 && a.Hz <= 10000) {
		bad(prefix+".hz", "%v: want a rate above 0 and at most 10000 ticks a second", a.Hz)
	}
	if !(a.MinHz > 0 && a.MinHz <= a.Hz) {
		bad(prefix+".min_hz", "%v: want a rate above 0 and at most %s.hz (%v)", a.MinHz, prefix, a.Hz)
	}
	if a.Overrun != "skip" && a.Overrun != "catch_up" {
		bad(prefix+".overrun", "%q: want \"skip\" (drop late ticks) or \"catch_up\" (run every late tick)", a.Overrun)
	}
	if d, err := time.ParseDuration(a.TickSpin); err != nil || d < 0 || d > time.Second {
		bad(prefix+".tick_spin", "%q: want a duration from \"0s\" (never spin) to \"1s\", such as \"2ms\"", a.TickSpin)
	}
	for i, f := range a.Grants.Folders {
		if !filepath.IsAbs(f) {
			bad(fmt.Sprintf("%s.grants.folders[%d]", prefix, i), "%q: give an absolute folder", f)
		}
	}
	for i, h := range a.Grants.Hosts {
		if _, err := ParseEgressRules([]string{h}); err != nil {
			bad(fmt.Sprintf("%s.grants.hosts[%d]", prefix, i), "%v", err)
		}
	}
	switch a.BargeIn {
	case "boundary", "queue", "preempt":
	default:
		bad(prefix+".barge_in", "%q: want \"boundary\", \"queue\" or \"preempt\"", a.BargeIn)
	}
	if a.MaxIterations < 1 {
		bad(prefix+".max_iterations", "%d: a run loop needs at least 1 decision", a.MaxIterations)
	}
	if a.MaxToolCalls < 1 || a.MaxToolCalls > 1024 {
		bad(prefix+".max_tool_calls", "%d: want from 1 to 1024 tool calls a decision may run, such as 16", a.MaxToolCalls)
	}
	if a.QueryBackoff < 1 {
		bad(prefix+".query_backoff", "%d: want at least 1 unanswered query before the agent slows down", a.QueryBackoff)
	}
	return errs
}

func (l *LLMConfig) validate() []*Error {
	var errs []*Error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if l.BaseURL != "" {
		u, err := url.Parse(l.BaseURL)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
			bad("llm.base_url", "%q is not an http(s) URL; give the API root of an OpenAI-compatible endpoint, such as \"https://api.openai.com/v1\" or \"http://localhost:11434/v1\"", l.BaseURL)
		case u.User != nil:
			bad("llm.base_url", "holds credentials; put the API key in the environment variable named by llm.api_key_env instead")
		}
		if l.Model == "" {
			bad("llm.model", "is empty; name the model to ask for, such as \"gpt-4o-mini\" or \"llama3.2\"")
		}
	}
	if l.APIKeyEnv != "" && !identRE.MatchString(l.APIKeyEnv) {
		bad("llm.api_key_env", "%q is not an environment variable name; give the NAME of the variable that holds the key, such as \"OPENAI_API_KEY\", never the key itself", l.APIKeyEnv)
	}
	if d, err := time.ParseDuration(l.Timeout); err != nil || d <= 0 {
		bad("llm.timeout", "%q is not a positive duration; write it as \"60s\", \"2m\"", l.Timeout)
	}
	if l.MaxRetries < 0 || l.MaxRetries > maxLLMRetries {
		bad("llm.max_retries", "%d is out of range; want 0 (no retry) to %d", l.MaxRetries, maxLLMRetries)
	}
	if l.MaxResponseBytes < 4<<10 || l.MaxResponseBytes > 1<<30 {
		bad("llm.max_response_bytes", "%s is out of range; give a size from 4KiB to 1GiB, such as \"4MiB\"", l.MaxResponseBytes)
	}
	return errs
}
