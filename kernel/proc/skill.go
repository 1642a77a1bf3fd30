package proc

import (
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
		Argv:              argv,
		Cwd:               cwd,
		PTY:               s.Sandbox.PTY,
		WallLimit:         time.Duration(s.Limits.WallSeconds) * time.Second,
		OutputLimit:       int64(s.Limits.OutputBytes),
		MaxBytesPerSecond: int64(s.Limits.OutputRate),
		Policy: func(work, tmp string) (*sandbox.Policy, error) {
			return sandbox.FromSkill(s, work, tmp, callerEnv), nil
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
