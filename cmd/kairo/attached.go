package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/client"
	"golang.org/x/sys/unix"
)

// This file is what kairo spawn and kairo attach share: a process's output
// copied to the terminal, kairo's stdin and signals passed on to it, and
// its exit passed on as kairo's.

// output writes the chunks of the process a client follows: stdout to
// stdout and stderr to stderr, or, with json, one object per chunk on
// stdout. The client's reader calls it, in order per stream, and has
// written every chunk before the process.wait answer is read: the kernel
// sends the exit after the output.
type output struct {
	json bool

	// A spawn's first output can come before the spawn's reply: it is held
	// (up to maxHeld bytes) until release, so "spawned pN" prints first.
	mu      sync.Mutex
	holding bool
	held    []*abi.StreamChunk
	heldN   int
}

// maxHeld bounds the output held before a spawn's reply; past it the
// output is written at once.
const maxHeld = 1 << 20

// hold holds the chunks that come from now on until release.
func (o *output) hold() {
	o.mu.Lock()
	o.holding = true
	o.mu.Unlock()
}

// release writes the held chunks, in order, and writes the next ones as
// they come.
func (o *output) release() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.flushLocked()
}

func (o *output) flushLocked() {
	for _, ch := range o.held {
		o.write(ch)
	}
	o.held, o.heldN, o.holding = nil, 0, false
}

func (o *output) chunk(ch *abi.StreamChunk) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.holding {
		if o.heldN+len(ch.Chunk) <= maxHeld {
			c := *ch
			c.Chunk = append([]byte(nil), ch.Chunk...) // the client reuses its buffer
			o.held = append(o.held, &c)
			o.heldN += len(c.Chunk)
			return
		}
		o.flushLocked()
	}
	o.write(ch)
}

func (o *output) write(ch *abi.StreamChunk) {
	if o.json {
		os.Stdout.Write(append(chunkObject(ch), '\n'))
		return
	}
	w := os.Stdout
	if ch.Stream == "stderr" {
		w = os.Stderr
	}
	// Unbuffered: the process may be waiting for an answer to what it wrote.
	w.Write(ch.Chunk)
}

// chunkJSON is the --json form of a chunk: the text as it is when it is
// UTF-8, else base64 with encoding "base64".
type chunkJSON struct {
	Type      string `json:"type"` // "chunk"
	ProcessID string `json:"processId"`
	Stream    string `json:"stream"`
	Seq       uint64 `json:"seq"`
	Encoding  string `json:"encoding"`
	Chunk     string `json:"chunk"`
	Truncated bool   `json:"truncated"`
}

func chunkObject(ch *abi.StreamChunk) []byte {
	o := chunkJSON{Type: "chunk", ProcessID: ch.ProcessID, Stream: ch.Stream, Seq: ch.Seq,
		Encoding: "utf8", Chunk: string(ch.Chunk), Truncated: ch.Truncated}
	if ch.Encoding != "utf8" {
		o.Encoding = "base64"
		b := marshalJSON(ch.Chunk) // base64, quoted
		o.Chunk = string(b[1 : len(b)-1])
	}
	return marshalJSON(o)
}

// forwardStdin copies kairo's stdin to process id in reads of up to 32 KiB,
// then closes the process's stdin at end of file. It stops at the first
// write that fails: the process has exited or closed its input, and the
// wait reports what matters. Its goroutine stops with the client or at end
// of file; one blocked reading a terminal ends with kairo, which exits once
// the process has (a read of stdin cannot be interrupted).
func forwardStdin(c *client.Client, id string) {
	go func() {
		ctx := context.Background()
		buf := make([]byte, 32<<10)
		for {
			n, err := os.Stdin.Read(buf)
			if n > 0 {
				// The params are encoded before Call returns, so buf is free again.
				if c.Call(ctx, abi.MethodProcessStdinWrite, abi.StdinParams{ProcessID: id, Data: buf[:n]}, nil) != nil {
					return
				}
			}
			if errors.Is(err, io.EOF) {
				c.Call(ctx, abi.MethodProcessStdinWrite, abi.StdinParams{ProcessID: id, Close: true}, nil)
			}
			if err != nil {
				return
			}
		}
	}()
}

// errDetached: kairo attach stopped following on a signal; the process
// runs on.
var errDetached = errors.New("detached")

// follow waits for process id to exit while its output streams in.
// SIGINT, SIGTERM and SIGHUP on sigs go to the process when forward is
// set, and the second one kills it; without forward the first one ends
// follow with errDetached. SIGWINCH resizes the process's terminal to tty's.
func follow(ctx context.Context, c *client.Client, id string, sigs <-chan os.Signal, forward bool, tty *terminal) (abi.ProcessInfo, error) {
	type waited struct {
		res abi.WaitResult
		err error
	}
	// The wait ends with the process or with the client, which the caller
	// closes; the buffer lets it end when nobody reads it any more.
	done := make(chan waited, 1)
	go func() {
		var w waited
		w.err = c.Call(ctx, abi.MethodProcessWait, abi.WaitParams{ProcessID: id}, &w.res)
		done <- w
	}()
	signalled := 0
	for {
		select {
		case w := <-done:
			return w.res.Process, w.err
		case sig := <-sigs:
			if sig == syscall.SIGWINCH {
				if tty == nil {
					continue
				}
				if cols, rows, ok := termSize(tty.fd); ok {
					c.Call(ctx, abi.MethodProcessResize, abi.ResizeParams{ProcessID: id, Cols: cols, Rows: rows}, nil)
				}
				continue
			}
			if !forward {
				return abi.ProcessInfo{}, errDetached
			}
			// A failure here means the process has just exited or the
			// connection is gone; the wait says which.
			if signalled++; signalled == 1 {
				c.Call(ctx, abi.MethodProcessSignal, abi.SignalParams{ProcessID: id, Signal: unix.SignalName(sig.(syscall.Signal))}, nil)
			} else {
				c.Call(ctx, abi.MethodProcessKill, abi.ProcessRef{ProcessID: id}, nil)
			}
		}
	}
}

// printEnded prints what the kernel kept of a process that had ended when
// kairo attached: its last lines, stdout to stdout and stderr to stderr
// (with json, as chunks), and how it ended (with json, the exit object).
func printEnded(info abi.ProcessInfo, asJSON bool) {
	if more := info.Lines - len(info.LastLines); more > 0 && !asJSON {
		fmt.Fprintf(os.Stderr, "kairo: %s ended; its last %d lines (%d earlier ones were not kept):\n", termLine(info.ID), len(info.LastLines), more)
	}
	out := &output{json: asJSON}
	for i, l := range info.LastLines {
		out.chunk(&abi.StreamChunk{ProcessID: info.ID, Stream: l.Stream, Seq: uint64(i + 1), Encoding: "utf8", Chunk: []byte(l.Text + "\n")})
	}
	if asJSON {
		fmt.Printf("%s\n", marshalJSON(struct {
			Type string `json:"type"`
			processJSON
		}{"exit", newProcessJSON(info)}))
		return
	}
	if info.ExitCode != nil || info.Signal == "SIGINT" || info.Signal == "SIGPIPE" {
		fmt.Fprintf(os.Stderr, "kairo: %s\n", describe(info)) // processExit says the others
	}
}

// exitCode ends kairo with a code and no message of its own.
type exitCode int

func (e exitCode) Error() string { return "exit status " + strconv.Itoa(int(e)) }

// processExit passes a process's end on as kairo's, as a shell does: its
// exit code, or 128 + the number of the signal that ended it.
func processExit(info abi.ProcessInfo) error {
	code := 1
	switch {
	case info.ExitCode != nil:
		code = *info.ExitCode
	case info.Signal != "":
		if n := signalNumber(info.Signal); n > 0 {
			code = 128 + n
		}
		// Like a shell, quiet about the signals people send on purpose
		// or that come when the reader went away.
		if info.Signal != "SIGINT" && info.Signal != "SIGPIPE" {
			fmt.Fprintf(os.Stderr, "kairo: %s\n", describe(info))
		}
	default:
		fmt.Fprintf(os.Stderr, "kairo: %s\n", describe(info))
	}
	if code == 0 {
		return nil
	}
	return exitCode(code)
}

// signalNumber reads the kernel's name of a signal: "SIGKILL", or
// "signal 12" for one it has no name for; 0 if neither.
func signalNumber(name string) int {
	if n := unix.SignalNum(name); n != 0 {
		return int(n)
	}
	if n, err := strconv.Atoi(strings.TrimPrefix(name, "signal ")); err == nil && n > 0 {
		return n
	}
	return 0
}

// describe says how a process stands, for a person.
// signalWhy says why the sandbox sends the signals it sends.
var signalWhy = map[string]string{
	"SIGSYS":  ": the sandbox's seccomp filter refused a system call",
	"SIGXCPU": ": it used up its cpu time limit",
	"SIGXFSZ": ": it wrote past its file size limit",
}

func describe(info abi.ProcessInfo) string {
	who := fmt.Sprintf("%s (pid %d)", termLine(info.ID), info.PID)
	switch {
	case info.Status == abi.ProcessRunning:
		return who + " is running"
	case info.ExitCode != nil:
		return fmt.Sprintf("%s exited with code %d", who, *info.ExitCode)
	case info.Signal != "":
		return fmt.Sprintf("%s was killed by %s%s", who, termLine(info.Signal), signalWhy[info.Signal])
	}
	return fmt.Sprintf("%s ended (%s) with no exit code", who, termLine(info.Status))
}
