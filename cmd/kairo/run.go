package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host"
	"github.com/kairo-os/kairo/internal/audit"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sandbox"
	"github.com/kairo-os/kairo/sdk/client"
)

func runRun(ctx context.Context, args []string) error {
	f := newFlags("run", "kairo run [flags] SKILL.toml [-- ARGS...]", `
Run a binary skill under the sandbox its manifest describes, attached to
this terminal as kairo spawn is: its output here, this stdin to it, its
exit code passed through (a process the seccomp filter killed is reported
as such).

ARGS of the form name=value set the skill's params (the {name} placeholders
of its command); every other ARG is appended to the command, and so is
everything after a second "--".

When a kernel runs (kairo up), the skill runs in it: its process events go
on the bus and other clients can attach. When none does, kairo run starts a
private kernel of its own for the one run. The workspace ($WORK) is the
current folder unless --work says otherwise; the temp folder ($TMP) is made
for the run and removed after it.`)
	explain := f.Bool("explain", false, "print the rules the sandbox would apply, layer by layer, and run nothing")
	bestEffort := f.Bool("best-effort", false, "run even when this kernel cannot enforce every grant exactly (standalone only; a running kernel follows its kairo.toml), printing what is not enforced")
	workFlag := f.String("work", "", "the workspace `DIR`, $WORK (default: the current folder)")
	rest, err := f.parseArgv(args)
	if err != nil {
		return err
	}
	extra := rest[1:]
	if len(extra) > 0 && extra[0] == "--" {
		extra = extra[1:]
	}
	path, err := filepath.Abs(rest[0])
	if err != nil {
		return err
	}
	skill, err := manifests.LoadSkill(path)
	if err != nil {
		return err
	}
	work := *workFlag
	if work == "" {
		work, err = os.Getwd()
	} else {
		work, err = filepath.Abs(work)
	}
	if err != nil {
		return fmt.Errorf("--work: %w", err)
	}
	params, appended := skill.ParamsFromArgs(extra)
	if *explain {
		// A manifest is explained without its params: those not given
		// are shown as their placeholders.
		argv, unset, err := skill.ArgvTemplate(params, appended)
		if err != nil {
			return err
		}
		p := proc.SkillPolicy(skill, work, "$TMP", os.Environ())
		p.BestEffort = *bestEffort
		fmt.Printf("skill      %s %s (%s)\n", termLine(skill.Skill.Name), termLine(skill.Skill.Version), termLine(path))
		fmt.Printf("command    %s\n", termLine(strings.Join(argv, " ")))
		if len(unset) > 0 {
			fmt.Printf("params     not given, shown as {NAME}: %s (kairo run %s -- NAME=VALUE ...)\n", termLine(strings.Join(unset, ", ")), termLine(rest[0]))
		}
		sandbox.Explain(os.Stdout, p, argv[0])
		if len(skill.Progress) > 0 {
			fmt.Println("\nprogress rules (kairo.process.progress)")
			for _, r := range skill.Progress {
				fmt.Printf("   %s\n", termLine(r.Pattern))
			}
		}
		return nil
	}
	if _, err := skill.Argv(params, appended); err != nil {
		return err
	}
	warnUnwritableWork(skill, work)
	if *bestEffort {
		p := proc.SkillPolicy(skill, work, "$TMP", nil)
		for _, miss := range sandbox.Unenforced(p, sandbox.LandlockABI()) {
			fmt.Fprintf(os.Stderr, "kairo: best effort: not enforced on this kernel: %s\n", miss)
		}
	}
	spawn := abi.SpawnParams{
		Manifest: path, Params: params, Argv: appended, Cwd: work, Env: os.Environ(), PTY: skill.Sandbox.PTY,
	}
	c, err := dial(ctx)
	if err != nil {
		if !strings.Contains(err.Error(), "the kernel is not running") {
			return err
		}
		// No kernel: a private one for this run.
		k, stop, err := privateKernel(*bestEffort)
		if err != nil {
			return err
		}
		defer stop()
		c = k
	} else if *bestEffort {
		fmt.Fprintln(os.Stderr, "kairo: --best-effort is ignored: the running kernel follows sandbox.best_effort in its kairo.toml")
	}
	defer c.Close()
	// What the sandbox refused the run is said after it. The tree's events,
	// its members' too, carry this causation: it tells them from another
	// client's.
	spawn.CausationID = "kairo-run-" + abi.NewID()
	refused := followDenials(ctx, c, spawn.CausationID)
	err = spawnAttached(ctx, c, spawn)
	for _, d := range refused.end(denialGrace) {
		fmt.Fprintf(os.Stderr, "kairo: %s\n", denialLine(d))
	}
	return err
}

// warnUnwritableWork says so when skill writes its workspace and the
// sandbox, which a root kernel runs as a uid of its own, will not be able
// to: the workspace belongs to root.
func warnUnwritableWork(skill *manifests.Skill, work string) {
	if os.Geteuid() != 0 || !slices.ContainsFunc(skill.FS.Write, func(p string) bool { return strings.HasPrefix(p, "$WORK") }) {
		return
	}
	fi, err := os.Stat(work)
	if err != nil {
		return
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == 0 && fi.Mode().Perm()&0o002 == 0 {
		fmt.Fprintf(os.Stderr, "kairo: note: %s belongs to root, and the skill runs as an unprivileged uid of its own: its writes to $WORK will be refused. Give a folder the sandbox may write (--work DIR, a folder of mode 0777 or with an ACL for the range of [sandbox] uid_base).\n", work)
	}
}

// privateKernel starts a kernel in this process, the daemon's Private
// mode, and returns a client of it.
func privateKernel(bestEffort bool) (*client.Client, func(), error) {
	cfg := manifests.Default()
	cfg.Sandbox.BestEffort = bestEffort
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d := host.New(host.Config{Mode: host.Private, Config: cfg, Version: version, Logger: log})
	if err := d.Start(); err != nil {
		return nil, nil, err
	}
	stop := func() { d.Stop(context.Background()) }
	c, err := d.Connect()
	if err != nil {
		stop()
		return nil, nil, err
	}
	return c, stop, nil
}

func runSandbox(ctx context.Context, args []string) error {
	sub := []command{
		{"check", "print what this kernel's sandbox enforces", runSandboxCheck},
	}
	if len(args) == 0 {
		return &usageError{msg: "kairo sandbox needs a command: check", synopsis: "kairo sandbox check"}
	}
	return dispatch(ctx, sub, "kairo sandbox", args)
}

func runSandboxCheck(ctx context.Context, args []string) error {
	f := newFlags("sandbox check", "kairo sandbox check", `
Print what the sandbox enforces on this machine, layer by layer: the
Landlock ABI and what each of its versions adds, the seccomp filter,
no_new_privs, the uid a sandboxed process runs as, and the cgroup layout
process trees go in (or that there is none). A skill whose grants
need more than this kernel has is refused unless best effort is chosen.`)
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	feat := sandbox.Probe()
	sandbox.WriteCheck(os.Stdout, feat)
	// Where `kairo up` puts the process trees.
	if cgs, err := proc.FindCgroups(); err != nil {
		fmt.Printf("process trees: no cgroups (%v): each tree is killed by its process group and uid, bounded by rlimits only, and may outlive a daemon killed with SIGKILL\n", err)
	} else {
		fmt.Printf("process trees: each in a cgroup of its own, under one per home: %s\n", cgs)
	}
	// What the kernel can learn of the sandbox's refusals; kairo.toml
	// says whether `kairo up` may turn audit on.
	mode := manifests.SandboxAuditAuto
	if cfg, err := manifests.Load(filepath.Join(clientHome().dir, "kairo.toml")); err == nil {
		mode = cfg.Sandbox.Audit
	}
	audit.WriteCheck(os.Stdout, feat.LandlockABI, mode)
	if feat.LandlockABI == 0 {
		return errors.New("this kernel has no Landlock: skills are refused unless best effort is chosen")
	}
	return nil
}
