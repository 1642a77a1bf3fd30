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

	"github.com/kairo-os/kairo/sdk/client"
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
	return startDaemonConfig(b, "")
}

// startDaemonConfig is startDaemon with config, when not empty, as the
// home's kairo.toml.
func startDaemonConfig(b *testing.B, config string) (string, int) {
	b.Helper()
	return startDaemonHome(b, func(home string) {
		if config != "" {
			if err := os.WriteFile(filepath.Join(home, "kairo.toml"), []byte(config), 0o600); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// startDaemonHome is startDaemon with prepare called on the fresh home
// before the daemon starts: to put a kairo.toml, secrets or skills there.
func startDaemonHome(b *testing.B, prepare func(home string)) (string, int) {
	b.Helper()
	bin := kairoBinary(b)
	home, err := os.MkdirTemp("", "kairo-bench-home-")
	if err != nil {
		b.Fatal(err)
	}
	// Registered first, so it runs after the daemon has stopped.
	b.Cleanup(func() { os.RemoveAll(home) })
	prepare(home)
	cmd := exec.Command(bin, "up", "--home", home)
	// XDG_RUNTIME_DIR that does not exist: the daemon names its home in no
	// pointer file (cmd/kairo/pointer.go), not the user's.
	cmd.Env = append(os.Environ(), "KAIRO_HOME="+home, "KAIRO_SOCKET=", "XDG_RUNTIME_DIR="+filepath.Join(home, "no-runtime-dir"))
	// KAIRO_CPUPROFILE=FILE profiles each daemon into a file of its own.
	if prof := os.Getenv("KAIRO_CPUPROFILE"); prof != "" {
		prof += "." + filepath.Base(home)
		cmd.Env = append(cmd.Env, "KAIRO_CPUPROFILE="+prof)
		b.Logf("the daemon of %s writes its CPU profile to %s", home, prof)
	}
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
	})
	sock := filepath.Join(home, "kernel.sock")
	for deadline := time.Now().Add(30 * time.Second); ; {
		if c, err := client.Dial(context.Background(), sock); err == nil {
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

// kairoBinary builds kairo once for the benchmarks and returns its path.
func kairoBinary(b *testing.B) string {
	b.Helper()
	daemonBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "kairo-bench-bin-")
		if err != nil {
			daemonBin.err = err
			return
		}
		daemonBin.path = filepath.Join(dir, "kairo")
		// go test puts the toolchain's GOROOT/bin first in PATH. Static,
		// as the Makefile builds it: the binary is also the sandbox helper,
		// whose start is part of every spawn.
		// kairo-sandbox beside it is the helper kairo up uses, as the
		// Makefile builds them.
		build := exec.Command("go", "build", "-o", dir+"/", "../../cmd/kairo", "../../cmd/kairo-sandbox")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := build.CombinedOutput()
		if err != nil {
			daemonBin.err = &buildError{err, out}
		}
	})
	if daemonBin.err != nil {
		b.Fatal(daemonBin.err)
	}
	return daemonBin.path
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return "build kairo: " + e.err.Error() + "\n" + string(e.out) }

// dial connects a client to the kernel at path for the benchmark's length.
func dial(b *testing.B, path string) *client.Client {
	b.Helper()
	c, err := client.Dial(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}
