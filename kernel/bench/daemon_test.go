package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kairo-os/kairo/kernel/ipc"
)

// The process benchmarks run against a real `kairo up` child, so that its
// peak memory is the daemon's alone.
var daemonBin struct {
	once sync.Once
	path string
	err  error
}

// startDaemon builds kairo once and starts `kairo up` on a fresh home; it
// returns the socket and the daemon's pid. The daemon is stopped with the
// benchmark.
func startDaemon(b *testing.B) (string, int) {
	b.Helper()
	daemonBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "kairo-bench-bin-")
		if err != nil {
			daemonBin.err = err
			return
		}
		daemonBin.path = filepath.Join(dir, "kairo")
		// go test puts the toolchain's GOROOT/bin first in PATH.
		out, err := exec.Command("go", "build", "-o", daemonBin.path, "../../cmd/kairo").CombinedOutput()
		if err != nil {
			daemonBin.err = &buildError{err, out}
		}
	})
	if daemonBin.err != nil {
		b.Fatal(daemonBin.err)
	}
	home, err := os.MkdirTemp("", "kairo-bench-home-")
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(daemonBin.path, "up", "--home", home)
	cmd.Env = append(os.Environ(), "KAIRO_HOME="+home, "KAIRO_SOCKET=")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		os.RemoveAll(home)
	})
	sock := filepath.Join(home, "kernel.sock")
	for deadline := time.Now().Add(30 * time.Second); ; {
		if c, err := ipc.Dial(context.Background(), sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("kairo up did not open its socket in 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return sock, cmd.Process.Pid
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return "build kairo: " + e.err.Error() + "\n" + string(e.out) }

// dial connects a client to the kernel at path for the benchmark's length.
func dial(b *testing.B, path string) *ipc.Client {
	b.Helper()
	c, err := ipc.Dial(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}
