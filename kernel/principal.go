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
// cut to Ceiling, a command under Ceiling or the default profile with
// Hosts, in a workspace Kairo makes or in one of Folders.
type SpawnAuthority struct {
	// Skills are the installed skills it may run by name; "*" is all.
	Skills []string
	// Commands lets it run a program of its choosing (an argv).
	Commands bool
	// Folders are where its commands may work besides a workspace Kairo
	// makes: a working folder must lie inside one.
	Folders []string
	// Hosts are the hosts its commands may reach through the kernel's
	// egress proxy, as a skill's [net] hosts names them
	// ("api.github.com:443", "*.pypi.org", "127.0.0.1:8080"); none: no
	// network. Under a Ceiling, only those the ceiling's hosts cover too.
	// A named skill reaches its own manifest's hosts, not these.
	Hosts []string
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

// IntersectAuthority is what a principal may start when it acts for
// another: what both a and b allow. Delegation never widens authority —
// when agent A asks agent B, what B starts for A holds no more than A
// could start itself, nor than B could. A nil authority is the
// operator's, unbounded: the intersection with it is a copy of the other
// (nil when both are).
func IntersectAuthority(a, b *SpawnAuthority) *SpawnAuthority {
	if a == nil {
		a, b = b, a
	}
	if a == nil {
		return nil
	}
	if b == nil {
		return a.clone()
	}
	out := &SpawnAuthority{
		Skills:   intersectSkills(a.Skills, b.Skills),
		Commands: a.Commands && b.Commands,
		Folders:  intersectPaths(a.Folders, b.Folders),
		Hosts:    bothWays(a.Hosts, b.Hosts, intersectHosts),
	}
	switch {
	case a.Ceiling != nil && b.Ceiling != nil:
		out.Ceiling = Intersect(a.Ceiling, b.Ceiling, "", "")
	case a.Ceiling != nil:
		out.Ceiling = clonePolicy(a.Ceiling)
	case b.Ceiling != nil:
		out.Ceiling = clonePolicy(b.Ceiling)
	}
	switch {
	case a.IPC != nil && b.IPC != nil:
		out.IPC = a.IPC.intersectGrants(b.IPC)
	case a.IPC != nil:
		out.IPC = a.IPC.clone()
	case b.IPC != nil:
		out.IPC = b.IPC.clone()
	}
	return out
}

// clone is a copy of a that shares no list with it.
func (a *SpawnAuthority) clone() *SpawnAuthority {
	out := &SpawnAuthority{
		Skills: slices.Clone(a.Skills), Commands: a.Commands,
		Folders: slices.Clone(a.Folders), Hosts: slices.Clone(a.Hosts),
	}
	if a.Ceiling != nil {
		out.Ceiling = clonePolicy(a.Ceiling)
	}
	if a.IPC != nil {
		out.IPC = a.IPC.clone()
	}
	return out
}

// intersectSkills is the skills both lists name; "*" (all) in one list
// leaves the other's.
func intersectSkills(a, b []string) []string {
	switch {
	case slices.Contains(a, "*"):
		return slices.Clone(b)
	case slices.Contains(b, "*"):
		return slices.Clone(a)
	}
	out := []string{}
	for _, s := range a {
		if slices.Contains(b, s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// bothWays is what cut keeps of each list against the other, once each:
// an entry of either that the other covers (a host "api.github.com:443"
// under "*.github.com", a subject "app.x" under "app.>").
func bothWays(a, b []string, cut func(want, have []string) []string) []string {
	out := []string{}
	for _, e := range slices.Concat(cut(a, b), cut(b, a)) {
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
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
		} else {
			// Its commands reach the hosts its own sandbox does, through
			// its tree's proxy.
			bounded.Hosts = bounded.Ceiling.Hosts
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
		spec.Policy = commandPolicy(a, p.Env)
		if spec.Policy == nil {
			// The default profile, with the launcher's limits, and the
			// hosts the caller may reach.
			spec.Hosts = slices.Clone(a.Hosts)
		}
	}
	if parent != nil {
		// A child of a skill is part of the skill's tree: its run loop,
		// its uid and cgroup, ended with it.
		spec.Parent = parent
		spec.CorrelationID, spec.CausationID = "", ""
		inheritSecrets(parent, &spec)
	}
	return spec, nil
}

// commandPolicy is the policy of a command a may run, with env: its
// ceiling, with the command's own workspace and temp folder and the
// hosts both a and the ceiling hold. Nil when a has no ceiling: the
// command runs under the default profile.
func commandPolicy(a *SpawnAuthority, env []string) func(work, tmp string) (*sandbox.Policy, error) {
	ceiling := a.Ceiling
	if ceiling == nil {
		return nil
	}
	hosts := intersectHosts(a.Hosts, ceiling.Hosts)
	return func(work, tmp string) (*sandbox.Policy, error) {
		c := clonePolicy(ceiling)
		c.Write = append(c.Write, work, tmp)
		c.Hosts = slices.Clone(hosts)
		c.Env = sandbox.MergeEnv(sandbox.Default(work, tmp, nil).Env, env)
		c.Dir = work
		return c, nil
	}
}

// clonePolicy is a copy of p that shares no list with it.
func clonePolicy(p *sandbox.Policy) *sandbox.Policy {
	c := *p
	c.Read, c.Write, c.Exec, c.Unix = slices.Clone(p.Read), slices.Clone(p.Write), slices.Clone(p.Exec), slices.Clone(p.Unix)
	c.ConnectTCP, c.BindTCP = slices.Clone(p.ConnectTCP), slices.Clone(p.BindTCP)
	c.Hosts, c.Env = slices.Clone(p.Hosts), slices.Clone(p.Env)
	return &c
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
	out.Hosts = bothWays(p.Hosts, ceiling.Hosts, intersectHosts)
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
	return manifests.IPCGrants{
		Call:      commonMethods(want.Call, g.Call),
		Publish:   coveredSubjects(want.Publish, g.Publish),
		Subscribe: coveredSubjects(want.Subscribe, g.Subscribe),
	}
}

// intersectGrants is the scopes both g and o grant: the methods both
// list, and the subjects either lists that the other covers.
func (g *Grants) intersectGrants(o *Grants) *Grants {
	return &Grants{
		Call:      commonMethods(g.Call, o.Call),
		Publish:   bothWays(g.Publish, o.Publish, coveredSubjects),
		Subscribe: bothWays(g.Subscribe, o.Subscribe, coveredSubjects),
	}
}

func (g *Grants) clone() *Grants {
	return &Grants{Call: slices.Clone(g.Call), Publish: slices.Clone(g.Publish), Subscribe: slices.Clone(g.Subscribe)}
}

// commonMethods keeps the methods of want that have lists too.
func commonMethods(want, have []string) []string {
	var out []string
	for _, m := range want {
		if slices.Contains(have, m) {
			out = append(out, m)
		}
	}
	return out
}

// coveredSubjects keeps the subjects and patterns of want that a pattern
// of have covers.
func coveredSubjects(want, have []string) []string {
	var out []string
	for _, s := range want {
		if coveredBy(s, have) {
			out = append(out, s)
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
