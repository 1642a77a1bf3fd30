package main

import (
	"encoding/json"
	"errors"
	"github.com/kairo-os/kairo/sdk/client"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pointerEnv is the environment of a kairo child that finds its data folder
// as a user's would: no KAIRO_*, and runtime as XDG_RUNTIME_DIR.
func pointerEnv(runtime string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KAIRO_") && !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") {
			env = append(env, kv)
		}
	}
	return append(env, "XDG_RUNTIME_DIR="+runtime)
}

// kairoIn runs kairo in the folder dir with the environment env.
func kairoIn(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	return kairoRun(t, dir, env, nil, args...)
}

// statusObj is the part of `kairo status --json` about where it looked.
type statusObj struct {
	Home     string `json:"home"`
	HomeFrom string `json:"homeFrom"`
	Socket   string `json:"socket"`
}

func statusIn(t *testing.T, dir string, env []string) (statusObj, result) {
	t.Helper()
	r := kairoIn(t, dir, env, "status", "--json")
	var s statusObj
	if r.code == 0 {
		if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
			t.Fatalf("status --json: %v\n%s", err, r)
		}
	}
	return s, r
}

// A client finds the daemon its user started from any folder, through the
// pointer the daemon writes under XDG_RUNTIME_DIR; a live ./.kairo and an
// explicit KAIRO_HOME come first; a pointer others may write, or one left
// by a daemon that stopped, leads nowhere.
func TestDaemonFoundFromAnyFolder(t *testing.T) {
	t.Parallel()
	runtime := t.TempDir()
	pointer := filepath.Join(runtime, "kairo", "current")
	cwdA := t.TempDir() // a folder with a daemon in its ./.kairo
	homeA := filepath.Join(cwdA, ".kairo")
	homeB := t.TempDir()
	nowhere := t.TempDir() // a folder with none
	env := pointerEnv(runtime)

	a := startUpEnv(t, homeA, kairoBin, env)
	b := startUpEnv(t, homeB, kairoBin, env) // started last: the pointer names it
	until(t, "the pointer naming B", func() bool {
		got, err := os.ReadFile(pointer)
		return err == nil && string(got) == homeB+"\n"
	})
	if fi, err := os.Stat(pointer); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the pointer: %v, %v; want mode 0600", fi, err)
	}

	// From a folder with no daemon: B, through the pointer.
	s, r := statusIn(t, nowhere, env)
	if r.code != 0 || s.Home != homeB || s.HomeFrom != "pointer" || s.Socket != filepath.Join(homeB, "kernel.sock") {
		t.Fatalf("status from another folder: %+v\n%s", s, r)
	}
	if r := kairoIn(t, nowhere, env, "status"); r.code != 0 || !regexpMatch(`(?m)^home\s+`+regexp.QuoteMeta(homeB+" (found through "+pointer+")")+"$", r.stdout) {
		t.Fatalf("status (text) from another folder:\n%s", r)
	}
	// From A's folder: its own ./.kairo, live, comes before the pointer.
	if s, r := statusIn(t, cwdA, env); r.code != 0 || s.Home != homeA || s.HomeFrom != "cwd" {
		t.Fatalf("status from A's folder: %+v\n%s", s, r)
	}
	// An explicit KAIRO_HOME wins, even where no kernel runs.
	if r := kairoIn(t, nowhere, append(env, "KAIRO_HOME="+nowhere), "status"); r.code != 1 || !strings.Contains(r.stderr, "not running") {
		t.Fatalf("status with KAIRO_HOME where nothing runs:\n%s", r)
	}
	if s, r := statusIn(t, nowhere, append(env, "KAIRO_HOME="+homeA)); r.code != 0 || s.Home != homeA || s.HomeFrom != "KAIRO_HOME" {
		t.Fatalf("status with KAIRO_HOME=A: %+v\n%s", s, r)
	}

	// A pointer, or its folder, that others may write is not followed: B
	// is found through its own entry beside a pointer others may write,
	// and not at all in a folder others may write.
	for _, p := range []struct {
		path       string
		bad, right os.FileMode
		found      bool
	}{{pointer, 0o666, 0o600, true}, {filepath.Dir(pointer), 0o777, 0o700, false}} {
		if err := os.Chmod(p.path, p.bad); err != nil {
			t.Fatal(err)
		}
		if p.found {
			if s, r := statusIn(t, nowhere, env); r.code != 0 || s.Home != homeB {
				t.Fatalf("status with %s mode %#o: %+v\n%s", p.path, p.bad, s, r)
			}
		} else if r := kairoIn(t, nowhere, env, "status"); r.code != 1 || !strings.Contains(r.stderr, "not running") {
			t.Fatalf("status with %s mode %#o:\n%s", p.path, p.bad, r)
		}
		if err := os.Chmod(p.path, p.right); err != nil {
			t.Fatal(err)
		}
		if s, r := statusIn(t, nowhere, env); r.code != 0 || s.Home != homeB {
			t.Fatalf("status with %s mode %#o again: %+v\n%s", p.path, p.right, s, r)
		}
	}

	// B stops cleanly and hands the pointer to A, which runs: from
	// elsewhere, A (two daemons in two folders; a stop removes only its
	// own).
	if code := b.stop(); code != 0 {
		t.Fatalf("kairo up (B) exited %d\n%s", code, b.stderr)
	}
	if got, err := os.ReadFile(pointer); err != nil || string(got) != homeA+"\n" {
		t.Fatalf("the pointer after B's clean stop: %q, %v; want A's home", got, err)
	}
	if s, r := statusIn(t, nowhere, env); r.code != 0 || s.Home != homeA || s.HomeFrom != "pointer" {
		t.Fatalf("status from another folder with B stopped: %+v\n%s", s, r)
	}
	if s, r := statusIn(t, cwdA, env); r.code != 0 || s.Home != homeA {
		t.Fatalf("status from A's folder with B stopped: %+v\n%s", s, r)
	}

	// A pointer a crash left names a socket nobody listens on: the daemon
	// that runs is found through its own entry beside it.
	if err := os.WriteFile(pointer, []byte(homeB+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, r := statusIn(t, nowhere, env); r.code != 0 || s.Home != homeA || s.HomeFrom != "pointer" {
		t.Fatalf("status with a stale pointer and A running: %+v\n%s", s, r)
	}
	// An entry others may write is not followed, as the pointer is not;
	// the control is the same entry made private again.
	entryA := client.DaemonEntry(pointer, homeA)
	for _, mode := range []os.FileMode{0o666, 0o600} {
		if err := os.Chmod(entryA, mode); err != nil {
			t.Fatal(err)
		}
		s, r := statusIn(t, nowhere, env)
		if found := r.code == 0 && s.Home == homeA; found != (mode == 0o600) {
			t.Fatalf("status with A's entry mode %#o: %+v\n%s", mode, s, r)
		}
	}
	// A stops: its entry goes, and the stale pointer (not its own) stays;
	// an entry a crash left names nothing that listens: not running.
	if code := a.stop(); code != 0 {
		t.Fatalf("kairo up (A) exited %d\n%s", code, a.stderr)
	}
	if _, err := os.Stat(client.DaemonEntry(pointer, homeA)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("A's entry after its clean stop: %v; want it gone", err)
	}
	if err := os.WriteFile(client.DaemonEntry(pointer, homeB), []byte(homeB+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := kairoIn(t, nowhere, env, "status"); r.code != 1 || !strings.Contains(r.stderr, "not running") {
		t.Fatalf("status with a stale pointer and a stale entry:\n%s", r)
	}
}
