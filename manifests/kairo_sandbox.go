package manifests

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// SandboxConfig is the [sandbox] table.
type SandboxConfig struct {
	Mode       string `toml:"mode"`        // "enforce" or "off"
	BestEffort bool   `toml:"best_effort"` // run what cannot be confined exactly, saying so
	// UIDBase and UIDCount are the range of uids the trees run as when the
	// kernel is root, one per tree, each with a primary gid of the same
	// number: above 65535, and no account or group of the machine in it.
	UIDBase  int64 `toml:"uid_base"`
	UIDCount int64 `toml:"uid_count"`
	// StopGrace is how long a clean stop lets each tree end after SIGTERM
	// before it kills the tree's cgroup, a duration such as "5s".
	StopGrace string `toml:"stop_grace"`
	// KeepWorkspaces keeps the workspaces Kairo makes after their tree
	// ends; by default they are removed.
	KeepWorkspaces bool `toml:"keep_workspaces"`
	// WorkspaceMax caps what a spawn's workspace and temp folder hold.
	WorkspaceMax Size `toml:"workspace_max"`
	// Limits replace the default profile's limits (sandbox.DefaultLimits)
	// where set; 0 keeps the profile's.
	Limits SkillLimits `toml:"limits"`
	// Audit is how a root kernel learns what the sandbox refused, from
	// the Linux audit subsystem: SandboxAuditAuto (also "") turns audit
	// on while a kairo runs if it is off, SandboxAuditOff leaves audit
	// alone and reports no refusal.
	Audit string `toml:"audit"`
}

// StopGraceDuration is StopGrace parsed; valid once Validate passed.
func (s SandboxConfig) StopGraceDuration() time.Duration {
	d, _ := time.ParseDuration(s.StopGrace)
	return d
}

func (s *SandboxConfig) validate() []*Error {
	var errs []*Error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	switch s.Mode {
	case SandboxEnforce, SandboxOff:
	default:
		bad("sandbox.mode", "%q: want %q (every binary runs confined) or %q (binaries run as they are: development only)", s.Mode, SandboxEnforce, SandboxOff)
	}
	switch {
	case s.UIDBase < MinSandboxUID || s.UIDBase > MaxSandboxUID:
		bad("sandbox.uid_base", "%d: want a uid from %d to %d, above the accounts' range, such as 2145386496 (0x7fe00000)", s.UIDBase, MinSandboxUID, MaxSandboxUID)
	case s.UIDCount < 1 || s.UIDBase+s.UIDCount-1 > MaxSandboxUID:
		bad("sandbox.uid_count", "%d: want from 1 to %d uids from uid_base %d (one per process tree running at once)", s.UIDCount, MaxSandboxUID-s.UIDBase+1, s.UIDBase)
	default:
		for i, file := range passwdFiles {
			if name, id := idInRange(file, s.UIDBase, s.UIDBase+s.UIDCount); name != "" {
				what := [2]string{"account", "group"}[i]
				bad("sandbox.uid_base", "the range %d-%d holds the %s %s (%d in %s): a tree would run with its rights; move uid_base or shrink uid_count", s.UIDBase, s.UIDBase+s.UIDCount-1, what, name, id, file)
			}
		}
	}
	switch s.Audit {
	case "", SandboxAuditAuto, SandboxAuditOff:
	default:
		bad("sandbox.audit", "%q: want %q (learn the sandbox's refusals from the audit subsystem, turning it on while kairo runs) or %q (leave audit alone)", s.Audit, SandboxAuditAuto, SandboxAuditOff)
	}
	if d, err := time.ParseDuration(s.StopGrace); err != nil || d < 0 {
		bad("sandbox.stop_grace", "%q is not a duration; write it as \"5s\" (\"0s\" kills at once)", s.StopGrace)
	}
	l := s.Limits
	for _, v := range []struct {
		key string
		n   int
	}{{"cpu_seconds", l.CPUSeconds}, {"wall_seconds", l.WallSeconds}, {"processes", l.Processes}, {"open_files", l.OpenFiles}} {
		if v.n < 0 {
			bad("sandbox.limits."+v.key, "%d is negative; 0 keeps the default profile's", v.n)
		}
	}
	return errs
}

// idInRange is the first entry of a passwd or group file whose id is in
// [lo, hi): its name and id; "" when none is (or the file cannot be read).
func idInRange(file string, lo, hi int64) (string, int64) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 3 {
			continue
		}
		var id int64
		if _, err := fmt.Sscan(f[2], &id); err == nil && id >= lo && id < hi {
			return f[0], id
		}
	}
	return "", 0
}
