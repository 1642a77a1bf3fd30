package proc

import (
	"slices"
	"strings"
	"time"

	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sandbox"
)

// SkillSpec is the spec of a run of skill s: its command with params
// filled in and extra appended, in workspace cwd ("" for one of its own),
// on a PTY when the manifest asks, under its grants and limits. callerEnv
// is where env.pass takes variables from.
func SkillSpec(s *manifests.Skill, params map[string]string, extra []string, cwd string, callerEnv []string) (Spec, error) {
	argv, err := s.Argv(params, extra)
	if err != nil {
		return Spec{}, err
	}
	spec := Spec{
		Skill:             s.Skill.Name,
		Argv:              argv,
		Cwd:               cwd,
		PTY:               s.Sandbox.PTY,
		WallLimit:         time.Duration(s.Limits.WallSeconds) * time.Second,
		OutputLimit:       int64(s.Limits.OutputBytes),
		MaxBytesPerSecond: int64(s.Limits.OutputRate),
		Policy: func(work, tmp string) (*sandbox.Policy, error) {
			return SkillPolicy(s, work, tmp, callerEnv), nil
		},
	}
	if g := s.IPC; len(g.Call) > 0 {
		spec.IPC = &g
	}
	for _, r := range s.Progress {
		spec.Progress = append(spec.Progress, r.Regexp())
	}
	return spec, nil
}

// SkillPolicy is the sandbox policy of skill s for a run with workspace work and temp
// folder tmp: its grants with $SKILL_DIR, $WORK and $TMP expanded, its
// limits, and an environment of PATH, HOME=work and TMPDIR=tmp, the
// variables of env.pass found in callerEnv, then env.set. The temp folder
// is always writable: it is the run's own.
func SkillPolicy(s *manifests.Skill, work, tmp string, callerEnv []string) *sandbox.Policy {
	vars := map[string]string{manifests.VarSkillDir: s.Dir, manifests.VarWork: work, manifests.VarTmp: tmp}
	// Each path once: "$TMP" in fs.write is the temp folder granted anyway.
	expand := func(ps []string, more ...string) []string {
		out := make([]string, 0, len(ps)+len(more))
		for _, p := range append(slices.Clone(ps), more...) {
			if p = s.ExpandPath(p, vars); !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
		return out
	}
	p := &sandbox.Policy{
		Read:           expand(s.FS.Read),
		Write:          expand(s.FS.Write, tmp),
		Exec:           expand(s.FS.Exec),
		ConnectTCP:     s.Net.ConnectTCP,
		BindTCP:        s.Net.BindTCP,
		UDP:            s.Net.UDP,
		Unix:           expand(s.Net.Unix),
		Hosts:          slices.Clone(s.Net.Hosts),
		Dir:            work,
		UID:            -1,
		GID:            -1,
		MinLandlockABI: s.Sandbox.MinLandlockABI,
		Limits: sandbox.Limits{
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
	env := []string{"PATH=" + sandbox.DefaultPath, "HOME=" + work, "TMPDIR=" + tmp}
	for _, name := range s.Env.Pass {
		for _, kv := range callerEnv {
			if strings.HasPrefix(kv, name+"=") {
				env = sandbox.MergeEnv(env, []string{kv})
			}
		}
	}
	for name, v := range s.Env.Set {
		env = sandbox.MergeEnv(env, []string{name + "=" + s.ExpandPath(v, vars)})
	}
	p.Env = env
	return p
}
