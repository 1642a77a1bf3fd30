package tools_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/tools"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
)

func skillTOML(name string) string {
	return "[skill]\nname = \"" + name + "\"\ncommand = [\"/usr/bin/true\"]\n[fs]\nexec = [\"/usr/bin/true\"]\n"
}

// watchedRegistry is a registry over a real kernel following the skills
// folder f.
func watchedRegistry(t *testing.T, f tools.SkillsFolder) *tools.Registry {
	t.Helper()
	b := bus.New(bus.NewMemoryStore(1<<10), bus.Config{})
	t.Cleanup(func() { b.Close() })
	k := kernel.New(b, kernel.Config{Logger: quiet})
	reg, err := tools.New(tools.Config{Kernel: k, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	if err := reg.WatchSkills(f); err != nil {
		t.Fatal(err)
	}
	return reg
}

// skillTools are the skill tools of reg: name → its error ("" for one
// that runs).
func skillTools(reg *tools.Registry) map[string]string {
	out := map[string]string{}
	for _, t := range reg.List() {
		if t.Source == abi.ToolSourceSkill {
			out[t.Name] = t.Error
		}
	}
	return out
}

// waitFor polls cond, long enough for a loaded machine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// The folder's caps hold: past MaxSkills, a skill is listed as skipped
// with why, and loads once another goes; a name installed twice, a folder
// past its size cap and a broken manifest are listed with why too, while
// the skills beside them load.
func TestSkillsFolderCaps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "skills")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeSkill(t, dir, "a", skillTOML("a"))
	writeSkill(t, dir, "b", skillTOML("b"))
	writeSkill(t, dir, "c", skillTOML("c"))
	writeSkill(t, dir, "aa", skillTOML("a"))
	big := writeSkill(t, dir, "big", skillTOML("big"))
	if err := os.WriteFile(filepath.Join(filepath.Dir(big), "data"), make([]byte, 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	writeSkill(t, dir, "bad", "[skill]\nname = \"bad\"\n")
	for i := range 10 { // past the cap, in a sum once past a few
		if err := os.Mkdir(filepath.Join(dir, fmt.Sprintf("z%02d", i)), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	reg := watchedRegistry(t, tools.SkillsFolder{Dir: dir, MaxSkills: 5, MaxBytes: 1 << 20})

	got := skillTools(reg)
	for _, name := range []string{"skill.a", "skill.b"} {
		if e, ok := got[name]; !ok || e != "" {
			t.Errorf("%s: want loaded, got %q (present %v)", name, e, ok)
		}
	}
	for name, want := range map[string]string{
		"skill.bad": "bad/skill.toml",
		"skill.big": "more than 1 MiB",
		"skill.c":   "more than 5 skills",
		"skill.aa":  "skill a is installed already, from " + filepath.Join(dir, "a"),
	} {
		if !strings.Contains(got[name], want) || !strings.HasPrefix(got[name], "not loaded: ") {
			t.Errorf("%s: want an error saying %q, got %q", name, want, got[name])
		}
	}
	if e := got["skill.z06"]; !strings.Contains(e, "more than 5 skills") {
		t.Errorf("skill.z06, the 8th past the cap: %q, want it listed with why", e)
	}
	if e := got["skill.…"]; !strings.Contains(e, "3 more folders are not read") || hasKey(got, "skill.z07") {
		t.Errorf("the folders past the 8th: want them in one sum, got %q (z07 listed: %v)", e, hasKey(got, "skill.z07"))
	}
	if names := strings.Join(reg.SkillNames(), " "); names != "a b" {
		t.Errorf("SkillNames: %q, want the two loaded", names)
	}
	if _, ok := reg.SkillPath("a"); !ok {
		t.Error("the kernel does not run skill a")
	}
	if _, ok := reg.SkillPath("c"); ok {
		t.Error("the kernel runs skill c, past the cap")
	}

	// Removing two makes room: c loads.
	os.RemoveAll(filepath.Join(dir, "b"))
	os.RemoveAll(filepath.Join(dir, "bad"))
	waitFor(t, "skill c loads once b is gone", func() bool {
		got := skillTools(reg)
		_, b := got["skill.b"]
		return got["skill.c"] == "" && hasKey(got, "skill.c") && !b
	})
	if _, ok := reg.SkillPath("c"); !ok {
		t.Error("the kernel does not run skill c once loaded")
	}
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

// With a stage, the kernel runs a copy of the skill's folder, made on a
// path the sandboxes' uids may pass; a change makes a new copy and the
// old one goes.
func TestSkillsStaged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "skills")
	stage := filepath.Join(t.TempDir(), "stage")
	manifest := writeSkill(t, dir, "s", skillTOML("s"))
	if err := os.WriteFile(filepath.Join(dir, "s", "run.sh"), []byte("#!/bin/sh\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("run.sh", filepath.Join(dir, "s", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "s", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "s", "bin", "tool"), []byte("#!/bin/sh\necho 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	reg := watchedRegistry(t, tools.SkillsFolder{Dir: dir, Stage: stage})
	run, ok := reg.SkillPath("s")
	if !ok || !strings.HasPrefix(run, stage+"/") || run == manifest {
		t.Fatalf("the kernel runs %q (%v), want a copy under %s", run, ok, stage)
	}
	copyDir := filepath.Dir(run)
	fi, err := os.Stat(copyDir)
	if err != nil || fi.Mode().Perm()&0o011 != 0o011 {
		t.Errorf("the copy's folder is %v (%v), want it passable by every uid", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(copyDir, "run.sh")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("run.sh copied as %v (%v), want its mode kept", fi, err)
	}
	if target, err := os.Readlink(filepath.Join(copyDir, "link")); err != nil || target != "run.sh" {
		t.Errorf("the link copied as %q (%v), want a link still", target, err)
	}

	// A program in a folder of the skill's changed: a new copy, holding it.
	if err := os.WriteFile(filepath.Join(dir, "s", "bin", "tool"), []byte("#!/bin/sh\necho 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a copy with the new bin/tool", func() bool {
		now, _ := reg.SkillPath("s")
		b, _ := os.ReadFile(filepath.Join(filepath.Dir(now), "bin", "tool"))
		return now != run && string(b) == "#!/bin/sh\necho 2\n"
	})
	run, _ = reg.SkillPath("s")
	copyDir = filepath.Dir(run)

	// Changed: a new copy; the old one is removed.
	if err := os.WriteFile(manifest, []byte(skillTOML("s")+"\n# changed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a new copy", func() bool { now, ok := reg.SkillPath("s"); return ok && now != run })
	waitFor(t, "the old copy removed", func() bool { _, err := os.Stat(copyDir); return os.IsNotExist(err) })
	if now, ok := reg.SkillPath("s"); !ok || now == run {
		t.Errorf("the kernel runs %q (%v) after the change", now, ok)
	}
}
