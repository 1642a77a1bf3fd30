package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/kairo-os/kairo/sandbox"
)

// Launch builds the policy, the folders, the uid and the cgroup of one
// spawn. A spawn with a Parent runs as its tree's uid, in a cgroup inside
// its tree's.
func (l *Sandboxed) Launch(spec *Spec) (*Launch, error) {
	b := &launching{l: l, spec: spec, tree: spec.tree, member: spec.Parent != nil}
	if b.tree == nil {
		b.tree, b.member = newTree(), false
	}
	steps := []func() error{b.takeHelper, b.makeFolders, b.buildPolicy, b.assignUID, b.giveSecrets, b.startEgress, b.buildCommand, b.fitHelper, b.placeInCgroup}
	for _, step := range steps {
		if err := step(); err != nil {
			b.giveBack()
			return nil, err
		}
	}
	return b.launch(), nil
}

// launching is one Launch while it is built: what each step made, and
// what to give back if a later step fails.
type launching struct {
	l      *Sandboxed
	spec   *Spec
	tree   *Tree
	member bool        // the spawn joins spec.Parent's tree
	w      *warmHelper // the helper that runs the spawn, or nil
	undo   []func()    // what to give back if the launch fails

	tmp, work  string
	made, keep bool // work was made for the spawn; it outlives the spawn
	// The uids tmp and work were given with the waiting helper (0: none).
	tmpOwner, workOwner int
	p                   *sandbox.Policy
	uid                 int // -1: the kernel's own
	stopEgress          func()
	c                   *sandbox.Cmd
	cg                  *cgroup
}

// giveBack undoes what the steps so far made, the last first.
func (b *launching) giveBack() {
	for i := len(b.undo) - 1; i >= 0; i-- {
		b.undo[i]()
	}
}

// takeHelper takes a waiting helper, or starts one when the spawn needs a
// cgroup: the process must be in its cgroup before it runs anything of
// its own, so a helper that waits for its plan is put there first.
func (b *launching) takeHelper() error {
	l := b.l
	w := l.takeWarm()
	if w == nil && l.Cgroups != nil {
		var err error
		if w, err = l.startWarm(nil); err != nil {
			return err
		}
	}
	if w != nil {
		b.undo = append(b.undo, func() { l.discard(w) })
	}
	b.w = w
	return nil
}

// makeFolders picks the spawn's temp folder and workspace: those made
// with the helper, off the spawn's path, or new ones; a workspace to keep
// goes under Root/keep.
func (b *launching) makeFolders() error {
	l, w := b.l, b.w
	tmp, work, made := "", b.spec.Cwd, false
	keep := work == "" && (b.spec.KeepWorkspace || l.KeepWorkspaces)
	if w != nil && w.tmp != "" {
		// Made with the helper, off the spawn's path.
		tmp, b.tmpOwner = w.tmp, w.uid
		if work == "" && !keep {
			work, made, b.workOwner = w.work, true, w.uid
		} else {
			l.janitor.do(func() { os.RemoveAll(w.work) }) // not wanted
		}
	} else {
		tmp, work, made = l.folders(work, keep)
		if tmp == "" {
			return fmt.Errorf("sandbox temp folder or workspace: %s", work)
		}
		b.undo = append(b.undo, func() { os.RemoveAll(tmp) })
		if made {
			dir := work
			b.undo = append(b.undo, func() { os.RemoveAll(dir) })
		}
	}
	if work == "" { // kept, so not the one made ahead of time
		dir := filepath.Join(l.Root, "keep", l.nextName())
		if err := mkdirReachable(dir); err != nil {
			return fmt.Errorf("sandbox workspace: %w", err)
		}
		work, made = dir, true
		b.undo = append(b.undo, func() { os.RemoveAll(dir) })
	}
	b.tmp, b.work, b.made, b.keep = tmp, work, made, keep
	return nil
}

// buildPolicy is the spec's policy, or the default profile with the
// launcher's limits and the spec's hosts, in the spawn's folders, under
// the launcher's workspace cap.
func (b *launching) buildPolicy() error {
	l := b.l
	var p *sandbox.Policy
	var err error
	if b.spec.Policy != nil {
		p, err = b.spec.Policy(b.work, b.tmp)
	} else {
		p = sandbox.Default(b.work, b.tmp, b.spec.Env)
		overrideLimits(&p.Limits, l.Limits)
		p.Hosts = slices.Clone(b.spec.Hosts) // startEgress starts the tree's proxy for them
	}
	if err != nil {
		return err
	}
	if max := uint64(l.WorkspaceMax); max > 0 && (p.Limits.FileSize == 0 || p.Limits.FileSize > max) {
		p.Limits.FileSize = max // no one file past the cap
	}
	p.Dir = b.work
	p.BestEffort = p.BestEffort || l.BestEffort
	p.LogDenials = l.LogDenials
	b.p = p
	return nil
}

// assignUID gives the spawn its tree's uid, a new one for a new tree, when
// the kernel is root, and the spawn's folders to it; otherwise the spawn
// runs as the kernel.
func (b *launching) assignUID() error {
	l, p := b.l, b.p
	b.uid = -1
	if os.Geteuid() != 0 {
		p.UID, p.GID = -1, -1
		return nil
	}
	uid := b.tree.uid
	if !b.member {
		if w := b.w; w != nil && w.uid > 0 {
			uid, w.uid = w.uid, 0 // given out with the helper
		} else {
			var err error
			if uid, err = l.allocUID(); err != nil {
				return err
			}
		}
		b.tree.uid = uid
		b.undo = append(b.undo, func() { l.free(uid) })
	}
	b.uid = uid
	// Its own primary gid, of the same number, which no group has;
	// no supplementary groups.
	p.UID, p.GID = uid, uid
	if b.tmpOwner != uid {
		os.Chown(b.tmp, uid, uid)
	}
	if b.made && b.workOwner != uid {
		os.Chown(b.work, uid, uid)
	}
	return nil
}

// giveSecrets gives the spawn its secrets: the variables in its
// environment, the files in $KAIRO_SECRETS, a folder of its temp folder
// that only its uid may read (mode 0500, each file 0400).
func (b *launching) giveSecrets() error {
	s := b.spec.Secrets
	if s == nil {
		return nil
	}
	b.p.Env = sandbox.MergeEnv(b.p.Env, s.Env)
	if len(s.Files) == 0 {
		return nil
	}
	dir := filepath.Join(b.tmp, ".secrets")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("make the secrets folder: %w", err)
	}
	for name, value := range s.Files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, value, 0o400); err != nil {
			return fmt.Errorf("write the secret %s: %w", name, err)
		}
		if b.uid >= 0 {
			if err := os.Chown(path, b.uid, b.uid); err != nil {
				return fmt.Errorf("give the secret %s to the sandbox: %w", name, err)
			}
		}
	}
	if b.uid >= 0 {
		if err := os.Chown(dir, b.uid, b.uid); err != nil {
			return fmt.Errorf("give the secrets folder to the sandbox: %w", err)
		}
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		return err
	}
	b.p.Env = sandbox.MergeEnv(b.p.Env, []string{EnvSecretsDir + "=" + dir})
	return nil
}

// startEgress starts the tree's egress proxy, or joins the one it has,
// when the policy lists [net] hosts. The proxy serves the tree's uid only
// (the kernel's own, for trees that run as it).
func (b *launching) startEgress() error {
	peer := b.uid
	if peer < 0 {
		peer = os.Geteuid()
	}
	stop, err := b.l.treeEgress(b.tree, b.member, b.p, peer)
	if err != nil {
		return err
	}
	if stop != nil {
		b.undo = append(b.undo, stop)
	}
	b.stopEgress = stop
	return nil
}

// buildCommand makes the helper's command for the policy, after checking
// that the program exists and that the spawn's uid may reach it, and
// connects the spawn to the kernel when the spec asks for IPC.
func (b *launching) buildCommand() error {
	spec, p, uid := b.spec, b.p, b.uid
	p.IPC = spec.IPC != nil
	if name := missingProgram(spec.Argv, p.Env); name != "" {
		return &NoProgramError{Name: name, Path: envPath(p.Env)}
	}
	command := sandbox.Command
	if b.w != nil { // the plan goes in the handoff: no policy pipe
		command = sandbox.HandoffCommand
	}
	c, err := command(b.l.Helper, p, spec.Argv)
	if err != nil {
		return err
	}
	b.c = c
	b.undo = append(b.undo, func() { c.Started() }) // closes what Command opened
	if uid > 0 {
		// The exec is the sandbox uid's: a folder on the way to the
		// program that it may not pass makes a bare "permission denied".
		if dir := unpassable(c.Target, uid); dir != "" {
			return fmt.Errorf("the sandbox runs %s as uid %d, which may not pass through %s (mode %v, owner %d): make the folders on the way passable (chmod o+x) or put the program elsewhere",
				c.Target, uid, dir, modeOf(dir), ownerOf(dir))
		}
	}
	if spec.IPC != nil {
		return b.l.connect(c, uid, *spec.IPC, b.tree, spec.Skill)
	}
	return nil
}

// fitHelper replaces the waiting helper's process when the seccomp filter
// it installed while it waited is not the spawn's (a policy that grants
// sockets the default profile does not, or a LogDenials set since): by
// one that installs none, in the same cgroup, with the same folders and
// uid. Which filter the helpers started next install is sawFilter's.
func (b *launching) fitHelper() error {
	l, w := b.l, b.w
	if w == nil {
		return nil
	}
	fits := b.c.Fits(w.filter)
	l.sawFilter(sandbox.WarmFilterOf(b.p), fits)
	if fits {
		return nil
	}
	cmd, ctl, err := l.startHelper(nil)
	if err != nil {
		return err
	}
	if w.cg != nil {
		if err := w.cg.add(cmd.Process.Pid); err != nil {
			ctl.Close()
			cmd.Process.Kill()
			cmd.Wait()
			forgetLeader(cmd.Process.Pid)
			return err
		}
	}
	old, oldCtl, oldNS := w.cmd, w.ctl, w.mntns
	w.cmd, w.ctl, w.filter, w.mntns = cmd, ctl, nil, holdMountNS(cmd.Process.Pid)
	oldCtl.Close() // it exits when its control socket closes
	old.Process.Kill()
	old.Wait()
	forgetLeader(old.Process.Pid)
	l.closeLater(oldNS)
	return nil
}

// placeInCgroup puts the spawn in its cgroup: a waiting helper sits in a
// tree cgroup made for it ahead of time, which a new tree takes; a member
// moves to a cgroup inside its tree's.
func (b *launching) placeInCgroup() error {
	w, tree := b.w, b.tree
	if w == nil || w.cg == nil {
		return nil
	}
	cg := w.cg
	if b.member && tree.cg != nil {
		var err error
		if cg, err = tree.cg.join(); err != nil {
			return err
		}
		leaf := cg
		b.undo = append(b.undo, func() { leaf.kill(); leaf.remove() }) // the helper in it too
		if err = cg.add(w.cmd.Process.Pid); err != nil {
			return err
		}
	} else if !b.member {
		tree.cg, tree.memory = cg, b.p.Limits.Memory
	}
	b.cg = cg
	return nil
}

// launch is the Launch the steps built: run through the waiting helper
// when there is one, with the cgroup's limits written before the target
// runs, the workspace watched, and a Cleanup that gives back all of it.
func (b *launching) launch() *Launch {
	l, w, c, cg := b.l, b.w, b.c, b.cg
	launch := &Launch{Cmd: c.Cmd, Started: c.Started, Work: b.work, Policy: b.p, cg: cg}
	if w != nil {
		if w.cg != nil && cg != w.cg {
			l.janitor.do(w.cg.remove) // empty: its helper moved out
		}
		if uid := w.uid; uid > 0 {
			// A spawn that joins a tree runs as the tree's uid: the
			// helper's was never used.
			w.uid = 0
			l.janitor.do(func() { l.free(uid) })
		}
		launch.Cmd = w.cmd
		launch.Handoff = func(stdin, stdout, stderr *os.File, ctty bool) error {
			err := c.Handoff(w.ctl, stdin, stdout, stderr, ctty)
			w.ctl.Close()
			if err != nil {
				w.cmd.Process.Kill()
				w.cmd.Wait()
				// Spawn holds leaders.mu around the handoff: taking it
				// again here stopped every spawn and the orphan reaper.
				delete(leaders.pids, w.cmd.Process.Pid)
			}
			return err
		}
	}
	if cg != nil && !b.member && (b.p.Limits.Memory != w.memory || b.p.Limits.Processes != w.pids) {
		b.setLimitsEarly(launch)
	}
	var dirs []string
	if l.WorkspaceMax > 0 {
		dirs = []string{b.tmp}
		if b.made {
			dirs = append(dirs, b.work)
		}
		launch.started = func(s *Session) { l.sizes.watch(l, s, dirs) }
	}
	launch.Cleanup = b.cleanup(launch, dirs)
	return launch
}

// setLimitsEarly writes the policy's limits, other than those the cgroup
// was made with, before the target runs, so they bound it from its first
// instruction. A limit under what the waiting helper holds (a large
// helper, a small limit) cannot be written then; it bites from the
// target's exec on, and until then the target's rlimits bound it.
func (b *launching) setLimitsEarly(launch *Launch) {
	c, cg, limits := b.c, b.cg, b.p.Limits
	early := false
	handoff := launch.Handoff
	launch.Handoff = func(stdin, stdout, stderr *os.File, ctty bool) error {
		early = cg.setLimits(limits.Memory, limits.Processes, false) == nil
		return handoff(stdin, stdout, stderr, ctty)
	}
	launch.Started = func() error {
		err := c.Started()
		if err == nil && !early {
			err = cg.setLimits(limits.Memory, limits.Processes, true)
		}
		return err
	}
}

// cleanup is the Launch's Cleanup: it kills what is left of the spawn,
// frees a new tree's uid, stops watching dirs and the tree's proxy, and
// removes the cgroup and the folders off the exit's path.
func (b *launching) cleanup(launch *Launch, dirs []string) func() {
	l, cg, member, uid, stopEgress := b.l, b.cg, b.member, b.uid, b.stopEgress
	tmp, work, made, keep := b.tmp, b.work, b.made, b.keep
	warm := b.w != nil
	var mntns *os.File
	if warm {
		mntns, b.w.mntns = b.w.mntns, nil // the spawn's now: its cleanup closes it
	}
	return func() {
		if warm {
			defer l.warmEnded() // its exited event is out: the pool may refill
		}
		if cg != nil {
			if cg.populated() {
				cg.kill()
			}
		} else if launch.Cmd.Process != nil {
			syscall.Kill(-launch.Cmd.Process.Pid, syscall.SIGKILL)
		}
		if !member && uid > 0 {
			if cg == nil {
				KillUID(uid) // what left the process group
			}
			l.free(uid)
		}
		if dirs != nil {
			l.sizes.forget(dirs)
		}
		if stopEgress != nil {
			stopEgress()
		}
		// Off the exit's path: removing folders on a virtual disk takes
		// a millisecond or more. Close waits for what is queued.
		l.closeLater(mntns) // the process is gone: the teardown is the janitor's
		l.janitor.do(func() {
			if cg != nil {
				cg.remove()
			}
			os.RemoveAll(tmp)
			if made && !keep {
				os.RemoveAll(work)
			}
		})
	}
}
