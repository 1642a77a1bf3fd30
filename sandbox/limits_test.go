package sandbox

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHelperUnderTightLimits: the helper, a Go program, sets the limits
// last and allocates nothing after them, so it reaches the exec under
// limits far below what its own runtime would need to start; the target
// runs under them (the shell reports them) — twenty times in a row, as an
// allocation after the limit failed only now and then.
func TestHelperUnderTightLimits(t *testing.T) {
	e := newEscapeEnv(t)
	p := e.policy(func(p *Policy) {
		p.Limits.Memory = 16 << 20
		p.Limits.OpenFiles = 16
		p.Limits.FileSize = 1 << 20
	})
	for range 20 {
		c, err := Command(os.Args[0], p, []string{"/bin/sh", "-c", "ulimit -v; ulimit -n; ulimit -f"})
		if err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		c.Stdout, c.Stderr = &out, &errb
		err = c.Start()
		if serr := c.Started(); serr != nil {
			t.Fatalf("the sandbox did not start: %v", serr)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(); err != nil {
			t.Fatalf("%v: %s", err, errb.String())
		}
		// ulimit -v and -f count KiB and 512-byte blocks.
		if got := strings.Fields(out.String()); strings.Join(got, " ") != "16384 16 2048" {
			t.Fatalf("limits seen by the target: %q, want 16384 16 2048", out.String())
		}
	}
}

// TestDefaultLimits: the default profile's processes run under finite
// limits, hard as well as soft, that they cannot raise; and under them a
// shell, python3, node, a JVM and `go build` still start and work.
func TestDefaultLimits(t *testing.T) {
	t.Parallel()
	e := newEscapeEnv(t)
	p := e.policy(nil)
	if p.Limits != DefaultLimits {
		t.Fatalf("the default profile's limits are %+v, want DefaultLimits %+v", p.Limits, DefaultLimits)
	}
	out := e.runCmd(t, p, "/bin/cat", "/proc/self/limits")
	want := map[string]uint64{
		"Max processes":      DefaultLimits.Processes,
		"Max address space":  DefaultLimits.Memory,
		"Max file size":      DefaultLimits.FileSize,
		"Max cpu time":       DefaultLimits.CPUSeconds,
		"Max open files":     DefaultLimits.OpenFiles,
		"Max core file size": 0,
	}
	seen := 0
	for _, line := range strings.Split(out, "\n") {
		for name, v := range want {
			rest, ok := strings.CutPrefix(line, name+" ")
			if !ok {
				continue
			}
			seen++
			f := strings.Fields(rest)
			if len(f) < 2 || f[0] == "unlimited" || f[1] == "unlimited" {
				t.Errorf("%s: %q, want finite", name, line)
				continue
			}
			soft, _ := strconv.ParseUint(f[0], 10, 64)
			hard, _ := strconv.ParseUint(f[1], 10, 64)
			if soft != v || (hard != v && !(name == "Max cpu time" && hard == v+1)) {
				t.Errorf("%s: soft %d hard %d, want %d", name, soft, hard, v)
			}
		}
	}
	if seen != len(want) {
		t.Fatalf("/proc/self/limits has %d of the %d limits:\n%s", seen, len(want), out)
	}
	// Hard limits: the target cannot lift them.
	if got := e.runCmd(t, p, "/bin/sh", "-c", "ulimit -n 4096 2>/dev/null && echo raised || echo refused"); got != "refused" {
		t.Errorf("ulimit -n 4096 inside the sandbox: %q, want refused", got)
	}

	t.Run("Programs", func(t *testing.T) {
		// go test puts its own go first in the PATH of the tests.
		gobin, err := exec.LookPath("go")
		noErr(t, err)
		gobin = realPath(gobin)
		goroot := filepath.Dir(filepath.Dir(gobin))
		src := filepath.Join(e.work, "hello")
		mkdirFixture(t, src, 0o755)
		writeFixture(t, src+"/go.mod", 0o644, "module hello\n\ngo 1.21\n")
		// No import: with its cache empty, go build compiles the runtime,
		// the largest and hungriest package it builds, and links; fmt's
		// dozen packages more took 40 % of the build's CPU (28.6 s against
		// 16.9 s, cache empty) and proved nothing more of the limits.
		writeFixture(t, src+"/main.go", 0o644, "package main\n\nfunc main() { println(\"hello from go\") }\n")
		noErr(t, os.Chown(src, e.uid, e.uid))
		for _, c := range []struct {
			name string
			argv []string
			want string
		}{
			{"sh", []string{"/bin/sh", "-c", "echo hello from sh"}, "hello from sh"},
			{"python3", []string{"/usr/bin/python3", "-c", "print('hello from python')"}, "hello from python"},
			{"node", []string{"/usr/bin/node", "-e", "console.log('hello from node')"}, "hello from node"},
			{"java", []string{"/usr/bin/java", "-XshowSettings:vm", "-version"}, "version"},
			// go build runs its compiler and linker from GOROOT; what it
			// builds could not run, as neither work nor tmp is exec.
			{"go build", []string{gobin, "build", "-o", "/dev/null", "."}, ""},
		} {
			t.Run(c.name, func(t *testing.T) {
				if _, err := os.Stat(c.argv[0]); err != nil {
					t.Skipf("%s is not installed", c.argv[0])
				}
				p := e.policy(func(p *Policy) {
					p.Exec = append(p.Exec, goroot)
					p.Dir = src
					p.Env = MergeEnv(p.Env, []string{"GOCACHE=" + e.tmp + "/gocache", "GOTOOLCHAIN=local", "CGO_ENABLED=0"})
				})
				if got := e.runCmd(t, p, c.argv...); !strings.Contains(got, c.want) {
					t.Errorf("%s under the default limits: %q, want it to say %q", c.name, got, c.want)
				}
			})
		}
	})
}

// runCmd runs argv under p and returns its stdout and stderr, failing t
// when it does not exit 0.
func (e *escapeEnv) runCmd(t *testing.T, p *Policy, argv ...string) string {
	t.Helper()
	c, err := Command(os.Args[0], p, argv)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err = c.Start()
	if serr := c.Started(); serr != nil {
		t.Fatalf("%v: the sandbox did not start: %v", argv, serr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("%v: %v\n%s", argv, err, out.String())
	}
	return strings.TrimSpace(out.String())
}
