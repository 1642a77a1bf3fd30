package manifests

import (
	"fmt"
	"net/url"
	"path/filepath"
	"time"
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

// AgentConfig is the [agent] table: the agent kairo up runs.
type AgentConfig struct {
	ID     string  `toml:"id"`     // routes kairo.agent.{id}.message
	Policy string  `toml:"policy"` // the policy plugin's name
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
	// TickSpin is how long before each tick the loop spins instead of
	// sleeping; "0s" for never.
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

func (a *AgentConfig) validate() []*Error {
	var errs []*Error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if a.ID == "" || len(a.ID) > maxSkillName || !skillNameRE.MatchString(a.ID) {
		bad("agent.id", "%q is not an agent id: use lower-case letters, digits, \"_\" and \"-\", such as \"default\"", a.ID)
	}
	if a.Policy == "" || !skillNameRE.MatchString(a.Policy) {
		bad("agent.policy", "%q is not a plugin name; name the policy plugin, such as \"rules\"", a.Policy)
	}
	if !(a.Hz > 0 && a.Hz <= 10000) {
		bad("agent.hz", "%v: want a rate above 0 and at most 10000 ticks a second", a.Hz)
	}
	if !(a.MinHz > 0 && a.MinHz <= a.Hz) {
		bad("agent.min_hz", "%v: want a rate above 0 and at most agent.hz (%v)", a.MinHz, a.Hz)
	}
	if a.Overrun != "skip" && a.Overrun != "catch_up" {
		bad("agent.overrun", "%q: want \"skip\" (drop late ticks) or \"catch_up\" (run every late tick)", a.Overrun)
	}
	if d, err := time.ParseDuration(a.TickSpin); err != nil || d < 0 || d > time.Second {
		bad("agent.tick_spin", "%q: want a duration from \"0s\" (never spin) to \"1s\", such as \"2ms\"", a.TickSpin)
	}
	for i, f := range a.Grants.Folders {
		if !filepath.IsAbs(f) {
			bad(fmt.Sprintf("agent.grants.folders[%d]", i), "%q: give an absolute folder", f)
		}
	}
	switch a.BargeIn {
	case "boundary", "queue", "preempt":
	default:
		bad("agent.barge_in", "%q: want \"boundary\", \"queue\" or \"preempt\"", a.BargeIn)
	}
	if a.MaxIterations < 1 {
		bad("agent.max_iterations", "%d: a run loop needs at least 1 decision", a.MaxIterations)
	}
	if a.MaxToolCalls < 1 || a.MaxToolCalls > 1024 {
		bad("agent.max_tool_calls", "%d: want from 1 to 1024 tool calls a decision may run, such as 16", a.MaxToolCalls)
	}
	if a.QueryBackoff < 1 {
		bad("agent.query_backoff", "%d: want at least 1 unanswered query before the agent slows down", a.QueryBackoff)
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
