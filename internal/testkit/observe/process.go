// Package observe runs the real observability programs Kairo's telemetry
// is tested against: the Jaeger v2 all-in-one binary, which receives OTLP
// and answers its query API ([Jaeger]), and Debian's Prometheus, which
// scrapes a /metrics endpoint and answers PromQL ([Prometheus]).
//
// Each program listens only on loopback ports the test chose, keeps its
// data in the test's temporary folder and is killed, with its process
// group, when the test ends. A missing binary fails the test with the
// command that provides it. The package imports nothing of Kairo's, so
// any test may use it.
package observe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// tailSize is how much of a program's stderr is kept for failure messages.
const tailSize = 16 << 10

// tail keeps the last tailSize bytes written to it.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if over := len(w.b) - tailSize; over > 0 {
		w.b = append(w.b[:0], w.b[over:]...)
	}
	return len(p), nil
}

// String is the kept tail, from its first whole line.
func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.b
	if len(b) == tailSize {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// process is one run of a program in a process group of its own. The
// goroutine that waits for it is owned by the process: kill ends the
// group and waits for that goroutine to return.
type process struct {
	name   string
	cmd    *exec.Cmd
	stderr *tail
	done   chan struct{} // closed when the program has exited
	err    error         // how it exited, set before done is closed
}

// start runs bin with args, its stdout and stderr kept in one tail.
func start(name, bin string, args ...string) (*process, error) {
	p := &process{name: name, stderr: &tail{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout = p.stderr
	p.cmd.Stderr = p.stderr
	// A group of its own, so kill reaches anything it starts; and killed
	// with the test binary if that dies before its cleanups run.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// kill ends the program's process group and waits until it has exited.
// It may be called again.
func (p *process) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// exited says how the program ended, or nil while it runs.
func (p *process) exited() error {
	select {
	case <-p.done:
		if p.err == nil {
			return fmt.Errorf("%s exited", p.name)
		}
		return fmt.Errorf("%s exited: %w", p.name, p.err)
	default:
		return nil
	}
}

// failure is err with the tail of what the program printed.
func (p *process) failure(err error) error {
	return fmt.Errorf("%w\n--- %s's output (tail) ---\n%s", err, p.name, p.stderr.String())
}

// waitReady polls ready every 50ms until it returns nil, the program
// exits or timeout passes; the error then carries the program's output.
func (p *process) waitReady(timeout time.Duration, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, time.Second)
		last = ready(attempt)
		cancelAttempt()
		if last == nil {
			return nil
		}
		if err := p.exited(); err != nil {
			return p.failure(err)
		}
		select {
		case <-ctx.Done():
			return p.failure(fmt.Errorf("%s not ready after %s: %w", p.name, timeout, last))
		case <-p.done:
		case <-tick.C:
		}
	}
}

// freePort is a loopback TCP port nothing listens on now. The program
// that is given it binds it a moment later; another process taking it in
// between makes that program fail to start, with a message that says so.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("observe: find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func hostPort(port int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// dialable says whether something accepts connections on addr.
func dialable(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// findBinary is path if it is an executable file; else the test fails
// with how to get it.
func findBinary(t testing.TB, what, path, howto string) string {
	t.Helper()
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		t.Fatalf("observe: %s is missing (%s): %s", what, path, howto)
	}
	if err != nil {
		t.Fatalf("observe: %s: %v", what, err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		t.Fatalf("observe: %s (%s) is not an executable file: %s", what, path, howto)
	}
	return path
}
