package kernel

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sandbox"
)

// Kind is the kind of principal a caller is. See
// docs/RATIONALE.md#who-the-principals-are for what each may do.
type Kind string

const (
	// KindOperator is a local client of the socket: the person who runs
	// Kairo, identified by SO_PEERCRED. It may name any manifest and any
	// folder. The zero [Kind] is the operator: in-process callers that act
	// for the operator's own configuration need not say so.
	KindOperator Kind = ""
	// KindSkill is a sandboxed binary skill on the IPC descriptor the
	// kernel gave it: its [ipc] grants, and what it starts stays in its
	// tree and inside its own sandbox.
	KindSkill Kind = abi.PrincipalSkill
	// KindPlugin is a wasm plugin: the grants the operator allowed it.
	KindPlugin Kind = abi.PrincipalPlugin
	// KindAgent is the agent, acting for a run loop: the model's tool
	// calls, within [agent.grants] of kairo.toml.
	KindAgent Kind = abi.PrincipalAgent
	// KindHost is a part of the daemon acting on the operator's
	// configuration (an MCP server of kairo.toml).
	KindHost Kind = abi.PrincipalHost
)

// SpawnAuthority is what a principal other than the operator may start.
// Whatever it starts holds at most what it holds: a named skill's grants
// cut to Ceiling, a command under Ceiling or the default profile, in a
// workspace Kairo makes or in one of Folders.
type SpawnAuthority struct {
	// Skills are the installed skills it may run by name; "*" is all.
	Skills []string
	// Commands lets it run a program of its choosing (an argv).
	Commands bool
	// Folders are where its commands may work besides a workspace Kairo
	// makes: a working folder must lie inside one.
	Folders []string
	// Ceiling, when set, bounds the sandbox of everything it starts: the
	// spawner's own (a skill's). Commands then run under it, and a named
	// skill gets the intersection of its grants and it.
	Ceiling *sandbox.Policy
	// IPC bounds the kernel scopes a started skill may be handed; nil
	// leaves a named skill its manifest's.
	IPC *Grants
}

// mayRunSkill reports whether a names the installed skill name.
func (a *SpawnAuthority) mayRunSkill(name string) bool {
	return slices.Contains(a.Skills, "*") || slices.Contains(a.Skills, name)
}

// folderFor checks a working folder a principal asked for: "" (a workspace
// Kairo makes) or a folder inside its Folders or its ceiling's writes. It
// returns the folder with its links resolved, which the spawn then uses:
// the sandbox opens it again without following links, so a link swapped in
// after this check grants nothing.
func (a *SpawnAuthority) folderFor(who, cwd string) (string, error) {
	if cwd == "" {
		return "", nil
	}
	if !filepath.IsAbs(cwd) {
		return "", fmt.Errorf("cwd %q: give an absolute folder, or none for a workspace Kairo makes", cwd)
	}
	cwd = filepath.Clean(cwd)
	allowed := slices.Clone(a.Folders)
	if a.Ceiling != nil {
		allowed = append(allowed, a.Ceiling.Write...)
	}
	// The folder as it resolves, links followed: a link inside a granted
	// folder must not lead out of it.
	real, err := filepath.EvalSymlinks(cwd)
	if err != nil {
		return "", fmt.Errorf("cwd %q: %v", cwd, err)
	}
	for _, f := range allowed {
		if under(cwd, f) && (under(real, f) || under(real, resolved(f))) {
			return real, nil
		}
	}
	return "", fmt.Errorf("cwd %q is outside what %s may write (%s): leave cwd empty to run in a workspace Kairo makes",
		cwd, who, listOrNone(allowed))
}

func resolved(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// under reports whether path is dir or inside it.
func under(path, dir string) bool {
	dir = filepath.Clean(dir)
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// attenuate builds the spec a non-operator caller may spawn for p, or says
// why it may not. Why: docs/RATIONALE.md#attenuation.
func (k *Kernel) attenuate(caller Caller, p *abi.SpawnParams) (proc.Spec, error) {
	who := caller.String()
	a := caller.Spawn
	if a == nil {
		a = &SpawnAuthority{}
	}
	var parent *proc.Session
	if caller.Tree != nil {
		// A skill: what it starts is bounded by its own sandbox and its
		// kernel scopes, and stays in its tree.
		if parent = caller.Tree.Root(); parent == nil {
			return proc.Spec{}, abi.Errorf(abi.CodeUnavailable, "%s: its process tree has ended", who)
		}
		bounded := *a
		bounded.Ceiling, bounded.IPC = parent.Policy(), caller.Grants
		if bounded.Ceiling == nil {
			// Unconfined (the sandbox is off): nothing to bound by, so
			// nothing but installed skills by name.
			bounded.Commands = false
		}
		a = &bounded
	}
	if p.Manifest != "" {
		return proc.Spec{}, abi.Errorf(abi.CodePermissionDenied,
			"permission denied: %s may not name a manifest file (%q); run an installed skill by name (the skill parameter)", who, p.Manifest)
	}
	cwd, err := a.folderFor(who, p.Cwd)
	if err != nil {
		return proc.Spec{}, abi.Errorf(abi.CodePermissionDenied, "permission denied: %v", err)
	}
	p.Cwd = cwd
	var spec proc.Spec
	if p.Skill != "" {
		if !a.mayRunSkill(p.Skill) {
			return proc.Spec{}, abi.Errorf(abi.CodePermissionDenied,
				"permission denied: %s may not run the skill %q (it may run %s)", who, p.Skill, listOrNone(a.Skills))
		}
		sk, err := k.installedSkill(p.Skill)
		if err != nil {
			return proc.Spec{}, err
		}
		if spec, err = k.skillRun(sk, p); err != nil {
			return proc.Spec{}, err
		}
		if a.IPC != nil && spec.IPC != nil {
			g := a.IPC.intersect(*spec.IPC)
			spec.IPC = &g
			if len(g.Call) == 0 {
				spec.IPC = nil
			}
		}
		if a.Ceiling != nil {
			base, ceiling := spec.Policy, a.Ceiling
			spec.Policy = func(work, tmp string) (*sandbox.Policy, error) {
				p, err := base(work, tmp)
				if err != nil {
					return nil, err
				}
				return Intersect(p, ceiling, work, tmp), nil
			}
		}
	} else {
		if !a.Commands {
			return proc.Spec{}, abi.Errorf(abi.CodePermissionDenied,
				"permission denied: %s may run only installed skills by name, not a command (%q)", who, first(p.Argv))
		}
		spec = k.commandSpec(p)
		if ceiling := a.Ceiling; ceiling != nil {
			env := p.Env
			spec.Policy = func(work, tmp string) (*sandbox.Policy, error) {
				c := *ceiling
				c.Read, c.Write, c.Exec, c.Unix = slices.Clone(c.Read), append(slices.Clone(c.Write), work, tmp), slices.Clone(c.Exec), slices.Clone(c.Unix)
				c.ConnectTCP, c.BindTCP = slices.Clone(c.ConnectTCP), slices.Clone(c.BindTCP)
				c.Hosts = slices.Clone(c.Hosts)
				c.Env = sandbox.MergeEnv(sandbox.Default(work, tmp, nil).Env, env)
				c.Dir = work
				return &c, nil
			}
		}
	}
	if parent != nil {
		// A child of a skill is part of the skill's tree: its run loop,
		// its uid and cgroup, ended with it.
		spec.Parent = parent
		spec.CorrelationID, spec.CausationID = "", ""
	}
	return spec, nil
}

func first(l []string) string {
	if len(l) == 0 {
		return ""
	}
	return l[0]
}

// installedSkill loads the skill name from the kernel's skills.
func (k *Kernel) installedSkill(name string) (*manifests.Skill, error) {
	k.mu.RLock()
	lookup := k.skills
	k.mu.RUnlock()
	if lookup == nil {
		return nil, abi.Errorf(abi.CodeNotFound, "no skill named %q: this kernel has no skills folder", name)
	}
	path, ok := lookup(name)
	if !ok {
		return nil, abi.Errorf(abi.CodeNotFound, "no skill named %q; `kairo tools` lists the skills", name)
	}
	sk, err := manifests.LoadSkill(path)
	if err != nil {
		return nil, abi.Errorf(abi.CodeInvalidParams, "skill %s: %v", name, err)
	}
	return sk, nil
}

// SetSkills gives the kernel its installed skills: lookup returns the
// skill.toml of the skill name. Principals other than the operator run
// skills only through it, by name.
func (k *Kernel) SetSkills(lookup func(name string) (path string, ok bool)) {
	k.mu.Lock()
	k.skills = lookup
	k.mu.Unlock()
}

// Intersect is the policy of a child whose own policy is p, started by a
// spawner confined to ceiling: each grant of p kept as far as ceiling
// holds it too, the limits the tighter of the two. work and tmp, the
// folders Kairo made for the child, stay its own.
func Intersect(p, ceiling *sandbox.Policy, work, tmp string) *sandbox.Policy {
	out := *p
	out.Read = intersectPaths(p.Read, slices.Concat(ceiling.Read, ceiling.Write, ceiling.Exec))
	out.Write = intersectPaths(p.Write, ceiling.Write)
	out.Exec = intersectPaths(p.Exec, ceiling.Exec)
	out.Unix = intersectPaths(p.Unix, ceiling.Unix)
	for _, own := range []string{work, tmp} {
		if own != "" && !slices.Contains(out.Write, own) {
			out.Write = append(out.Write, own)
		}
	}
	out.ConnectTCP = intersectPorts(p.ConnectTCP, ceiling.ConnectTCP)
	out.BindTCP = intersectPorts(p.BindTCP, ceiling.BindTCP)
	out.UDP = p.UDP && ceiling.UDP
	out.Hosts = intersectHosts(p.Hosts, ceiling.Hosts)
	out.MinLandlockABI = max(p.MinLandlockABI, ceiling.MinLandlockABI)
	// The environment: the sandbox's own variables, and of the child's
	// others only what the spawner holds too — a skill run by another
	// does not hand it the secrets of its env.set.
	out.Env = nil
	for _, kv := range p.Env {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(sandboxVars, name) || slices.Contains(ceiling.Env, kv) {
			out.Env = append(out.Env, kv)
		}
	}
	out.Limits = tighter(p.Limits, ceiling.Limits)
	return &out
}

// sandboxVars are the variables the sandbox sets for every child.
var sandboxVars = []string{"PATH", "HOME", "TMPDIR", "LANG"}

// intersectPaths keeps what both lists grant: a path of want inside a path
// of have, or a path of have inside a path of want.
func intersectPaths(want, have []string) []string {
	out := []string{}
	add := func(p string) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, w := range want {
		for _, h := range have {
			switch {
			case under(w, h):
				add(w)
			case under(h, w):
				add(h)
			}
		}
	}
	return out
}

func intersectPorts(want, have []uint16) []uint16 {
	out := []uint16{}
	for _, w := range want {
		if slices.Contains(have, w) {
			out = append(out, w)
		}
	}
	return out
}

// tighter is the smaller of each limit, 0 being none.
func tighter(a, b sandbox.Limits) sandbox.Limits {
	u := func(x, y uint64) uint64 {
		if x == 0 || (y != 0 && y < x) {
			return y
		}
		return x
	}
	out := sandbox.Limits{
		CPUSeconds: u(a.CPUSeconds, b.CPUSeconds), Memory: u(a.Memory, b.Memory),
		Processes: u(a.Processes, b.Processes), FileSize: u(a.FileSize, b.FileSize),
		OpenFiles: u(a.OpenFiles, b.OpenFiles), OutputBytes: u(a.OutputBytes, b.OutputBytes),
		OutputRate: u(a.OutputRate, b.OutputRate), Wall: a.Wall,
	}
	if out.Wall == 0 || (b.Wall != 0 && b.Wall < out.Wall) {
		out.Wall = b.Wall
	}
	return out
}

// intersect is the IPC scopes of g that the grants hold too.
func (g *Grants) intersect(want manifests.IPCGrants) manifests.IPCGrants {
	var out manifests.IPCGrants
	for _, m := range want.Call {
		if slices.Contains(g.Call, m) {
			out.Call = append(out.Call, m)
		}
	}
	for _, s := range want.Publish {
		if coveredBy(s, g.Publish) {
			out.Publish = append(out.Publish, s)
		}
	}
	for _, s := range want.Subscribe {
		if coveredBy(s, g.Subscribe) {
			out.Subscribe = append(out.Subscribe, s)
		}
	}
	return out
}

// intersectHosts keeps the [net] hosts entries of want that the list have
// covers; an entry without a port keeps those of 443 and 80 that have
// holds.
func intersectHosts(want, have []string) []string {
	out := []string{}
	rules, err := manifests.ParseEgressRules(have)
	if err != nil || len(have) == 0 {
		return out
	}
	for _, h := range want {
		if rules.Covers(h) {
			out = append(out, h)
			continue
		}
		if !strings.Contains(h, ":") {
			for _, port := range []string{":443", ":80"} {
				if rules.Covers(h + port) {
					out = append(out, h+port)
				}
			}
		}
	}
	return out
}
