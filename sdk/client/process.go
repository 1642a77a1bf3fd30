package client

import (
	"bytes"
	"context"
	"strings"
	"sync"

	"github.com/kairo-os/kairo/abi"
)

// KeptOutput bounds what a [Process] keeps of its output: the last
// KeptOutput bytes of stdout, of stderr, and of the two as they came.
const KeptOutput = 256 << 10

// Process is a process of the kernel this client spawned ([Client.Spawn])
// or attached to ([Client.Attach]). It keeps the process's output as it
// comes, so that once [Process.Wait] returns, [Process.Stdout],
// [Process.Stderr], [Process.Output] and [Process.LastLines] hold all of it
// (its last [KeptOutput] bytes). [Client.OnChunk] still sees every chunk,
// for a program that streams it.
type Process struct {
	c  *Client
	id string

	mu   sync.Mutex // guards info and out
	info abi.ProcessInfo
	out  *kept
}

// kept is what a process wrote, each part bounded to its last KeptOutput bytes.
type kept struct {
	stdout, stderr, both []byte
}

func (k *kept) add(ch *abi.StreamChunk) {
	if ch.Stream == "stderr" {
		k.stderr = keepTail(k.stderr, ch.Chunk)
	} else {
		k.stdout = keepTail(k.stdout, ch.Chunk)
	}
	k.both = keepTail(k.both, ch.Chunk)
}

// keepTail appends p to b and drops what is older than the last
// KeptOutput bytes, copying only once b is twice that.
func keepTail(b, p []byte) []byte {
	b = append(b, p...)
	if len(b) > 2*KeptOutput {
		b = append(b[:0:0], b[len(b)-KeptOutput:]...)
	}
	return b
}

func tail(b []byte) []byte {
	if len(b) > KeptOutput {
		b = b[len(b)-KeptOutput:]
	}
	return bytes.Clone(b)
}

// procTable routes output to the processes of Spawn and Attach; the
// client's mu guards it.
type procTable struct {
	byID map[string]*Process
	// spawning counts the spawns in flight: a process's first output may
	// arrive before the response that names it, so while one is in flight
	// the output of processes not known yet is kept in early.
	spawning int
	early    map[string]*kept
}

// listening reports whether any output is to be kept.
func (t *procTable) listening() bool { return len(t.byID) > 0 || t.spawning > 0 }

// keepChunk hands ch to its process, or keeps it until a spawn in flight
// names the process. It runs on the reader.
func (c *Client) keepChunk(ch *abi.StreamChunk) {
	c.mu.Lock()
	p, ok := c.procs.byID[ch.ProcessID]
	if !ok {
		if c.procs.spawning > 0 {
			k := c.procs.early[ch.ProcessID]
			if k == nil {
				k = &kept{}
				c.procs.early[ch.ProcessID] = k
			}
			k.add(ch)
		}
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	p.mu.Lock()
	p.out.add(ch)
	p.mu.Unlock()
}

// Spawn starts a process (process.spawn) and returns it; its output comes
// to this client and the Process keeps it. Pair it with [Process.Wait],
// which returns its exit and lets the client forget it. A failure the
// kernel reports — a command it may not run, a manifest it refuses — is an
// [*abi.Error].
func (c *Client) Spawn(ctx context.Context, params abi.SpawnParams) (*Process, error) {
	c.mu.Lock()
	if c.procs.spawning == 0 {
		c.procs.early = map[string]*kept{}
	}
	c.procs.spawning++
	c.mu.Unlock()
	var info abi.ProcessInfo
	err := c.Call(ctx, abi.MethodProcessSpawn, params, &info)
	c.mu.Lock()
	defer c.mu.Unlock()
	var p *Process
	if err == nil {
		p = &Process{c: c, id: info.ID, info: info, out: c.procs.early[info.ID]}
		if p.out == nil {
			p.out = &kept{}
		}
		c.procs.add(p)
	}
	if c.procs.spawning--; c.procs.spawning == 0 {
		c.procs.early = nil
	}
	return p, err
}

func (t *procTable) add(p *Process) {
	if t.byID == nil {
		t.byID = map[string]*Process{}
	}
	t.byID[p.id] = p
}

// Attach follows process id, which another client of the same user spawned
// (process.attach): its output from now on comes to this client, and the
// Process keeps it; what it wrote before is not sent again. Attach lets
// this client steer it as its own.
func (c *Client) Attach(ctx context.Context, id string) (*Process, error) {
	c.mu.Lock()
	p, ok := c.procs.byID[id]
	if !ok {
		p = &Process{c: c, id: id, out: &kept{}}
		c.procs.add(p) // before the call: its output may come before the response
	}
	c.mu.Unlock()
	var info abi.ProcessInfo
	if err := c.Call(ctx, abi.MethodProcessAttach, abi.ProcessRef{ProcessID: id}, &info); err != nil {
		if !ok {
			c.forgetProcess(p)
		}
		return nil, err
	}
	p.mu.Lock()
	p.info = info
	p.mu.Unlock()
	return p, nil
}

func (c *Client) forgetProcess(p *Process) {
	c.mu.Lock()
	if c.procs.byID[p.id] == p {
		delete(c.procs.byID, p.id)
	}
	c.mu.Unlock()
}

// ID is the process's id in the kernel ("p3"), which kairo ps, attach and
// kill take.
func (p *Process) ID() string { return p.id }

// Info is the process as it stood when it was spawned or attached, or
// when Wait or Signal last reported it.
func (p *Process) Info() abi.ProcessInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.info
}

// Wait waits for the process to exit (process.wait) and returns how it
// ended: Status [abi.ProcessExited] with its ExitCode, or
// [abi.ProcessKilled] with the Signal. The kernel answers once the
// process's output is read, so the output kept is whole when Wait returns.
// The client then forgets the process; what it kept stays readable.
func (p *Process) Wait(ctx context.Context) (abi.ProcessInfo, error) {
	var res abi.WaitResult
	if err := p.c.Call(ctx, abi.MethodProcessWait, abi.WaitParams{ProcessID: p.id}, &res); err != nil {
		return abi.ProcessInfo{}, err
	}
	p.c.forgetProcess(p)
	p.mu.Lock()
	p.info = res.Process
	p.mu.Unlock()
	return res.Process, nil
}

// Signal sends sig ("TERM", "SIGINT", or a number) to the process's whole
// tree (process.signal) and returns how it stands.
func (p *Process) Signal(ctx context.Context, sig string) (abi.ProcessInfo, error) {
	var info abi.ProcessInfo
	if err := p.c.Call(ctx, abi.MethodProcessSignal, abi.SignalParams{ProcessID: p.id, Signal: sig}, &info); err != nil {
		return info, err
	}
	p.mu.Lock()
	p.info = info
	p.mu.Unlock()
	return info, nil
}

// WriteStdin writes data to the process's stdin (process.stdin.write);
// it returns once the process has taken it.
func (p *Process) WriteStdin(ctx context.Context, data []byte) error {
	return p.c.Call(ctx, abi.MethodProcessStdinWrite, abi.StdinParams{ProcessID: p.id, Data: data}, nil)
}

// CloseStdin ends the process's input: it reads end of file.
func (p *Process) CloseStdin(ctx context.Context) error {
	return p.c.Call(ctx, abi.MethodProcessStdinWrite, abi.StdinParams{ProcessID: p.id, Close: true}, nil)
}

// Stdout is what the process wrote to stdout so far (on a PTY, everything
// it wrote): a copy of its last [KeptOutput] bytes.
func (p *Process) Stdout() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return tail(p.out.stdout)
}

// Stderr is what the process wrote to stderr so far: a copy of its last
// [KeptOutput] bytes.
func (p *Process) Stderr() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return tail(p.out.stderr)
}

// Output is what the process wrote to stdout and stderr so far, in the
// order it came: a copy of its last [KeptOutput] bytes.
func (p *Process) Output() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return tail(p.out.both)
}

// LastLines returns the last n lines of [Process.Output], without their
// line ends; a last line without its newline counts.
func (p *Process) LastLines(n int) []string {
	if n <= 0 {
		return nil
	}
	s := strings.TrimSuffix(string(p.Output()), "\n")
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}
