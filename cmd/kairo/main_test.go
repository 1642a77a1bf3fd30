package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kairo-os/kairo/internal/testkit"
	"github.com/kairo-os/kairo/sdk/client"
)

// kairoBin is the kairo binary the tests run, built once by TestMain.
var kairoBin string

// The tests that run the binary call t.Parallel: each has its own
// KAIRO_HOME, socket and cache (childEnv), its own ports (127.0.0.1:0,
// bound by the daemon), and sleeps of its own length where it finds
// processes by command line (sandbox_tree_test.go, delegation_test.go).
// Serial are the tests that change process-wide state (os.Stdout and
// KAIRO_SOCKET in tools_test.go and escape_test.go), those that pick a
// port and free it before a program listens on it (the JetStream tests of
// hosts_test.go, twohosts_test.go and store_jetstream_test.go; the Jaeger
// of traces_test.go), and the in-process ones of a few milliseconds, for
// which overlap gains nothing.
//
// kairo-sandbox lies beside kairo, as `make build` lays them out, and every
// home compiles its drop-in plugins into one compilation cache, as the
// homes of one user share the user's (testkit.MainConfig): a daemon
// compiles a module no other test's daemon compiled before. The tests of
// the cache and of a full disk give their home a cache of its own
// (ownCacheEnv); binCopy's kairo has no helper beside it.
func TestMain(m *testing.M) {
	testkit.MainWith(m, &kairoBin, testkit.MainConfig{Helper: true, SharedCache: true})
}

// ownCacheEnv is childEnv with the home's own compilation cache, the
// folder "cache" in it, rather than the tests' shared one.
func ownCacheEnv(home string) []string {
	return append(childEnv(home), "XDG_CACHE_HOME="+filepath.Join(home, "cache"))
}

// goTool is the go command of the toolchain running the tests: go test puts
// its GOROOT/bin first in PATH.
func goTool() string { return "go" }

// childEnv is the environment of a kairo child on home (testkit.ChildEnv).
func childEnv(home string) []string { return testkit.ChildEnv(home) }

// result is a finished kairo run.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
}

// kairo runs the binary with KAIRO_HOME=home and waits for it.
func kairo(t *testing.T, home string, args ...string) result {
	t.Helper()
	return kairoStdin(t, home, nil, args...)
}

// kairoStdin is kairo with stdin read from in (nil: /dev/null). It is
// killed (code -1) after two minutes: a command that compiles a plugin
// takes tens of seconds on a loaded machine under the race detector.
func kairoStdin(t *testing.T, home string, in io.Reader, args ...string) result {
	t.Helper()
	return kairoRun(t, "", childEnv(home), in, args...)
}

// kairoRun runs the binary in dir (the test's own when "") with env and
// stdin in, and waits for it, two minutes at most.
func kairoRun(t testing.TB, dir string, env []string, in io.Reader, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kairoBin, args...)
	cmd.Dir, cmd.Env, cmd.Stdin = dir, env, in
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("kairo %s: %v", strings.Join(args, " "), err)
	}
	return result{stdout.String(), stderr.String(), code}
}

// syncBuffer collects a child's output while the test reads it.
type syncBuffer = testkit.SyncBuffer

// upProc is a `kairo up` child process.
type upProc struct {
	t      testing.TB
	home   string
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan struct{} // closed when Wait returned
	err    error         // Wait's result, once exited
}

// startUp starts `kairo up --home home` and returns once its socket
// answers a ping.
func startUp(t *testing.T, home string) *upProc {
	t.Helper()
	return startUpBin(t, home, kairoBin)
}

// startUpBin is startUp with another kairo binary: one with built-in
// plugins beside it.
func startUpBin(t *testing.T, home, bin string) *upProc {
	t.Helper()
	return startUpEnv(t, home, bin, childEnv(home))
}

// startUpEnv is startUpBin with the environment env.
func startUpEnv(t testing.TB, home, bin string, env []string) *upProc {
	t.Helper()
	d := &upProc{t: t, home: home, stderr: &syncBuffer{}, exited: make(chan struct{})}
	d.cmd = exec.Command(bin, "up", "--home", home)
	d.cmd.Env = env
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			d.cmd.Process.Kill()
			<-d.exited
		}
	})
	d.waitReady()
	return d
}

func (d *upProc) socket() string { return filepath.Join(d.home, "kernel.sock") }

// waitReady dials the socket until it answers, then waits, as any client
// can, until the daemon says it is up (client.WaitReady); or until the
// daemon exits, or a deadline passes.
func (d *upProc) waitReady() {
	d.t.Helper()
	// Ready means every plugin compiled: on a loaded 2-core machine that
	// takes many times its usual second or two (a minute was seen).
	const ready = 3 * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), ready)
	defer cancel()
	go func() {
		select {
		case <-d.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	var err error
	for ctx.Err() == nil {
		var c *client.Client
		if c, err = client.Dial(ctx, d.socket()); err == nil {
			err = c.WaitReady(ctx)
			c.Close()
			if err == nil {
				return
			}
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	select {
	case <-d.exited:
		d.t.Fatalf("kairo up exited before it was ready: %v\n%s", d.err, d.stderr)
	default:
	}
	d.t.Fatalf("kairo up not ready after %v: %v\n%s", ready, err, d.stderr)
}

// dial connects the test itself to the daemon.
func (d *upProc) dial() *client.Client {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.socket())
	if err != nil {
		d.t.Fatal(err)
	}
	return c
}

// stop sends SIGTERM and returns the exit code.
func (d *upProc) stop() int {
	d.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		d.t.Fatal(err)
	}
	return d.wait()
}

// kill ends the daemon with SIGKILL: a crash.
func (d *upProc) kill() {
	d.t.Helper()
	if err := d.cmd.Process.Kill(); err != nil {
		d.t.Fatal(err)
	}
	d.wait()
}

func (d *upProc) wait() int {
	d.t.Helper()
	select {
	case <-d.exited:
	case <-time.After(15 * time.Second):
		d.cmd.Process.Kill()
		d.t.Fatalf("kairo up did not exit within 15s\n%s", d.stderr)
	}
	var ee *exec.ExitError
	if errors.As(d.err, &ee) {
		return ee.ExitCode() // -1 when killed by a signal
	}
	if d.err != nil {
		d.t.Fatal(d.err)
	}
	return 0
}
