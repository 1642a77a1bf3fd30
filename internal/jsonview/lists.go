package jsonview

import (
	"encoding/json"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/abi/modelname"
	"github.com/vmihailenco/msgpack/v5"
)

// Plugin is the --json form of a plugin; the keys are the wire names
// of abi.PluginStatus, and every key is always there (a list empty, not
// null).
type Plugin struct {
	Name      string    `json:"name"`
	Version   string    `json:"version"`
	Kinds     []string  `json:"kinds"`
	File      string    `json:"file"`
	Builtin   bool      `json:"builtin"`
	Native    bool      `json:"native"`
	Trusted   bool      `json:"trusted"`
	State     string    `json:"state"`
	Error     string    `json:"error"`
	Since     time.Time `json:"since"`
	Failures  int       `json:"failures"`
	Restarts  int       `json:"restarts"`
	Denied    int       `json:"denied"`
	Subscribe []string  `json:"subscribe"`
	Publish   []string  `json:"publish"`
	Call      []string  `json:"call"`
	WASIFS    []string  `json:"wasiFs"`
	WASIEnv   []string  `json:"wasiEnv"`
	Services  []string  `json:"services"`
	Tools     []string  `json:"tools"`
	Requested *Grant    `json:"requested"` // null when it asks nothing beyond its grants
	Capped    []string  `json:"capped"`
}

// Grant is what a manifest requested beyond the grants, as
// abi.PluginGrant names it.
type Grant struct {
	Subscribe []string `json:"subscribe"`
	Publish   []string `json:"publish"`
	Call      []string `json:"call"`
	WASIFS    []string `json:"wasiFs"`
	WASIEnv   []string `json:"wasiEnv"`
}

// NewPlugin is p's JSON form.
func NewPlugin(p abi.PluginStatus) Plugin {
	o := Plugin{
		Name: p.Name, Version: p.Version, Kinds: OrEmpty(p.Kinds), File: p.File, Builtin: p.Builtin, Native: p.Native, Trusted: p.Trusted,
		State: p.State, Error: p.Error, Since: p.Since, Failures: p.Failures, Restarts: p.Restarts, Denied: p.Denied,
		Subscribe: OrEmpty(p.Subscribe), Publish: OrEmpty(p.Publish), Call: OrEmpty(p.Call), WASIFS: OrEmpty(p.WASIFS), WASIEnv: OrEmpty(p.WASIEnv),
		Services: OrEmpty(p.Services), Tools: OrEmpty(p.Tools), Capped: OrEmpty(p.Capped),
	}
	if r := p.Requested; r != nil {
		o.Requested = &Grant{Subscribe: OrEmpty(r.Subscribe), Publish: OrEmpty(r.Publish), Call: OrEmpty(r.Call), WASIFS: OrEmpty(r.WASIFS), WASIEnv: OrEmpty(r.WASIEnv)}
	}
	return o
}

// OrEmpty is l, or an empty list for nil: --json prints [] rather than null
// for a list with nothing in it.
func OrEmpty[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}

// Each is f of every item of l, in order: a list's JSON form, empty (not
// null) when l is.
func Each[E, T any](l []E, f func(E) T) []T {
	out := make([]T, 0, len(l))
	for _, e := range l {
		out = append(out, f(e))
	}
	return out
}

// Tool is the --json form of a tool; the keys are the wire names of
// abi.ToolInfo, and every key is always there.
type Tool struct {
	Name        string         `json:"name"`
	Offered     string         `json:"offered"` // the name the model is offered it under; "" when it cannot be called
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"` // the JSON schema of its arguments
	Source      string         `json:"source"`
	Origin      string         `json:"origin"`
	Grants      []string       `json:"grants"`
	Error       string         `json:"error"`
}

// NewTool is t's JSON form; offered is the name the model is offered it
// under (OfferedNames).
func NewTool(t abi.ToolInfo, offered string) Tool {
	o := Tool{Name: t.Name, Offered: offered, Description: t.Description, Parameters: t.Parameters,
		Source: t.Source, Origin: t.Origin, Grants: OrEmpty(t.Grants), Error: t.Error}
	if o.Parameters == nil {
		o.Parameters = map[string]any{}
	}
	return o
}

// OfferedNames are the names the LLM policy offers the callable tools to
// the model under, as it computes them.
func OfferedNames(tools []abi.ToolInfo) map[string]string {
	var names []string
	for _, t := range tools {
		if t.Error == "" {
			names = append(names, t.Name)
		}
	}
	return modelname.Assign(names)
}

// Status is the --json form of kairo status.
type Status struct {
	Home       string   `json:"home"`     // the data folder, absolute; "" when KAIRO_SOCKET names the socket
	HomeFrom   string   `json:"homeFrom"` // how it was found: "KAIRO_HOME", "cwd", "pointer" or "KAIRO_SOCKET"
	Socket     string   `json:"socket"`
	Version    string   `json:"version"`
	ABIVersion int      `json:"abiVersion"`
	Ready      bool     `json:"ready"`          // the daemon is up, not only its socket (kernel.ping)
	Host       string   `json:"host,omitempty"` // its name among the hosts sharing its store
	Methods    []string `json:"methods"`
	Metrics    struct {
		UptimeSeconds float64 `json:"uptimeSeconds"`
		Goroutines    int     `json:"goroutines"`
		HeapBytes     uint64  `json:"heapBytes"`
		Connections   int     `json:"connections"`
		Subscriptions int     `json:"subscriptions"`
		LastSeq       uint64  `json:"lastSeq"`
		Published     uint64  `json:"published"`
		Duplicates    uint64  `json:"duplicates"`
		Delivered     uint64  `json:"delivered"`
		CatchUps      uint64  `json:"catchUps"`
		Requests      uint64  `json:"requests"`
		BadFrames     uint64  `json:"badFrames"`
		Store         string  `json:"store"`
		// StoreFull is set while the store's disk is full: since when, and
		// how many events it refused.
		StoreFull *Refusing `json:"storeFull,omitempty"`
		// StoreUnreachable is set while the store cannot be reached.
		StoreUnreachable *Refusing `json:"storeUnreachable,omitempty"`
	} `json:"metrics"`
}

// NewStatus is the status of a daemon from what kernel.introspect,
// system.get_metrics and kernel.ping answer; home, from and socket say
// where it was found.
func NewStatus(home, from, socket string, in abi.IntrospectResult, m abi.Metrics, ping abi.PingResult) Status {
	s := Status{Home: home, HomeFrom: from, Socket: socket, Version: in.Version, ABIVersion: in.ABIVersion, Ready: ping.Ready, Host: in.Host, Methods: in.Methods}
	s.Metrics.UptimeSeconds = m.Uptime.Seconds()
	s.Metrics.Goroutines, s.Metrics.HeapBytes = m.Goroutines, m.HeapBytes
	s.Metrics.Connections, s.Metrics.Subscriptions = m.Connections, m.Subscriptions
	s.Metrics.LastSeq, s.Metrics.Published, s.Metrics.Duplicates = m.LastSeq, m.Published, m.Duplicates
	s.Metrics.Delivered, s.Metrics.CatchUps = m.Delivered, m.CatchUps
	s.Metrics.Requests, s.Metrics.BadFrames, s.Metrics.Store = m.Requests, m.BadFrames, m.Store
	if !m.StoreFullSince.IsZero() {
		s.Metrics.StoreFull = &Refusing{m.StoreFullSince, m.StoreRefused}
	}
	if !m.StoreUnreachableSince.IsZero() {
		s.Metrics.StoreUnreachable = &Refusing{m.StoreUnreachableSince, m.StoreUnreachableRefused}
	}
	return s
}

// Refusing is a store refusing writes: since when, and how many events.
type Refusing struct {
	Since   time.Time `json:"since"`
	Refused uint64    `json:"refused"`
}

// Approval is an approval's wire form as JSON: the names approval.list
// gives it, the form `kairo approvals --json` prints and the console serves.
func Approval(a abi.Approval) (json.RawMessage, error) {
	raw, err := msgpack.Marshal(a)
	if err != nil {
		return nil, err
	}
	return FromMsgpack(raw)
}

// Agent is the --json form of an agent, as agent.list names it; every
// key is always there (a list empty, not null).
type Agent struct {
	ID          string      `json:"id"`
	Default     bool        `json:"default"`
	Policy      string      `json:"policy"`
	Description string      `json:"description"`
	Grants      AgentGrants `json:"grants"`
	ActsFor     []string    `json:"actsFor"`
	Memory      string      `json:"memory"`
	Open        int         `json:"open"`
}

// AgentGrants are an agent's grants, as [agent.grants] names them.
type AgentGrants struct {
	Skills   []string `json:"skills"`
	Commands bool     `json:"commands"`
	Folders  []string `json:"folders"`
	Hosts    []string `json:"hosts"`
}

// NewAgent is a's JSON form.
func NewAgent(a abi.AgentInfo) Agent {
	g := a.Grants
	return Agent{ID: a.ID, Default: a.Default, Policy: a.Policy, Description: a.Description,
		Grants:  AgentGrants{Skills: OrEmpty(g.Skills), Commands: g.Commands, Folders: OrEmpty(g.Folders), Hosts: OrEmpty(g.Hosts)},
		ActsFor: OrEmpty(a.ActsFor), Memory: a.Memory, Open: a.Open}
}
