package sandbox

import (
	"strings"
	"time"

	"github.com/kairo-os/kairo/manifests"
)

// FromSkill is the policy of skill s for a run with workspace work and temp
// folder tmp: its grants with $SKILL_DIR, $WORK and $TMP expanded, its
// limits, and an environment of PATH, HOME=work and TMPDIR=tmp, the
// variables of env.pass found in callerEnv, then env.set. The temp folder
// is always writable: it is the run's own.
func FromSkill(s *manifests.Skill, work, tmp string, callerEnv []string) *Policy {
	vars := map[string]string{manifests.VarSkillDir: s.Dir, manifests.VarWork: work, manifests.VarTmp: tmp}
	expand := func(ps []string) []string {
		out := make([]string, 0, len(ps))
		for _, p := range ps {
			out = append(out, s.ExpandPath(p, vars))
		}
		return out
	}
	p := &Policy{
		Read:           expand(s.FS.Read),
		Write:          append(expand(s.FS.Write), tmp),
		Exec:           expand(s.FS.Exec),
		ConnectTCP:     s.Net.ConnectTCP,
		BindTCP:        s.Net.BindTCP,
		UDP:            s.Net.UDP,
		Unix:           expand(s.Net.Unix),
		Dir:            work,
		UID:            -1,
		GID:            -1,
		MinLandlockABI: s.Sandbox.MinLandlockABI,
		Limits: Limits{
			CPUSeconds:  uint64(s.Limits.CPUSeconds),
			Memory:      uint64(s.Limits.Memory),
			Processes:   uint64(s.Limits.Processes),
			FileSize:    uint64(s.Limits.FileSize),
			OpenFiles:   uint64(s.Limits.OpenFiles),
			Wall:        time.Duration(s.Limits.WallSeconds) * time.Second,
			OutputBytes: uint64(s.Limits.OutputBytes),
			OutputRate:  uint64(s.Limits.OutputRate),
		},
	}
	env := []string{"PATH=" + DefaultPath, "HOME=" + work, "TMPDIR=" + tmp}
	for _, name := range s.Env.Pass {
		for _, kv := range callerEnv {
			if strings.HasPrefix(kv, name+"=") {
				env = mergeEnv(env, []string{kv})
			}
		}
	}
	for name, v := range s.Env.Set {
		env = mergeEnv(env, []string{name + "=" + s.ExpandPath(v, vars)})
	}
	p.Env = env
	return p
}
