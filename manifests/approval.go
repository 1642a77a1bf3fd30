package manifests

import (
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/kairo-os/kairo/abi"
)

// Approval modes, as [approval] tables write them: when a tool or a skill
// needs a person's yes.
const (
	ApprovalAlways = abi.ApprovalAlways // before every run
	// ApprovalOnDeny runs it sandboxed; when the sandbox refused it
	// something, a person is asked to run it again with exactly that
	// grant added, once.
	ApprovalOnDeny = abi.ApprovalOnDeny
	ApprovalNever  = abi.ApprovalNever
)

// ApprovalConfig is kairo.toml's [approval]: which tools need a person,
// and how long a request waits for one.
type ApprovalConfig struct {
	// Timeout is how long a request waits before it is denied, such as
	// "10m"; default 10 minutes.
	Timeout string `toml:"timeout"`
	// Tools maps a tool name or a pattern of them ("skill.*",
	// "mcp.github.*", "process.spawn") to a mode. The longest pattern
	// that matches a tool decides; a skill's own [approval] mode counts
	// too, and the stricter of the two wins.
	Tools map[string]string `toml:"tools"`
}

// TimeoutDuration is Timeout parsed; 0 when it is empty.
func (a *ApprovalConfig) TimeoutDuration() time.Duration {
	d, _ := time.ParseDuration(a.Timeout)
	return d
}

func (a *ApprovalConfig) validate() []*Error {
	var errs []*Error
	if a.Timeout != "" {
		if d, err := time.ParseDuration(a.Timeout); err != nil || d < time.Second || d > 30*24*time.Hour {
			errs = append(errs, &Error{Key: "approval.timeout", Msg: fmt.Sprintf("%q: give a duration from 1s to 720h, such as \"10m\"", a.Timeout)})
		}
	}
	names := make([]string, 0, len(a.Tools))
	for name := range a.Tools {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if msg := approvalModeError(a.Tools[name]); msg != "" {
			errs = append(errs, &Error{Key: "approval.tools." + toml.Key{name}.String(), Msg: msg})
		}
		if _, err := path.Match(name, ""); err != nil || name == "" {
			errs = append(errs, &Error{Key: "approval.tools." + toml.Key{name}.String(), Msg: fmt.Sprintf("%q is not a tool name or pattern; write one such as \"skill.*\" or \"process.spawn\"", name)})
		}
	}
	return errs
}

func approvalModeError(mode string) string {
	switch mode {
	case ApprovalAlways, ApprovalOnDeny, ApprovalNever:
		return ""
	}
	return fmt.Sprintf("%q is not a mode; want %q (ask before every run), %q (ask to re-run with what the sandbox refused) or %q", mode, ApprovalAlways, ApprovalOnDeny, ApprovalNever)
}

// ModeFor is the mode kairo.toml gives tool: that of the longest pattern
// that matches it, or "never".
func (a *ApprovalConfig) ModeFor(tool string) string {
	best, mode := -1, ApprovalNever
	for pat, m := range a.Tools {
		if ok, _ := path.Match(pat, tool); ok && len(pat) > best {
			best, mode = len(pat), m
		}
	}
	return mode
}

// StricterApproval is the stricter of two modes: always, then on-deny,
// then never.
func StricterApproval(a, b string) string {
	rank := func(m string) int {
		switch m {
		case ApprovalAlways:
			return 2
		case ApprovalOnDeny:
			return 1
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	if a == "" {
		return ApprovalNever
	}
	return a
}

// SkillApproval is a skill manifest's [approval] table.
type SkillApproval struct {
	Mode string `toml:"mode"` // ApprovalAlways, ApprovalOnDeny or ApprovalNever (the default)
}

func (c *skillCheck) checkApproval() {
	if m := c.s.Approval.Mode; m != "" {
		if msg := approvalModeError(strings.TrimSpace(m)); msg != "" {
			c.bad(toml.Key{"approval", "mode"}, "%s", msg)
		}
	}
}
