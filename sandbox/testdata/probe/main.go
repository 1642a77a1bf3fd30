// Command probe is the escape suite's sandboxed child: it tries one thing
// with raw system calls and prints exactly one line saying what the kernel
// answered, "ok" or "errno NAME" (a few operations print what they read).
// It exits 0 whatever the answer; a probe killed by a signal shows in its
// exit status. The tests build it static (CGO_ENABLED=0) so that it needs
// nothing from the system to start.
//
//	probe OPERATION [ARGUMENT...]
package main

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// An operation returns what to print on success ("" prints "ok") or the
// error the kernel gave.
type operation struct {
	args int // number of arguments; -1 for any
	run  func(args []string) (string, error)
}

var operations = map[string]operation{}

// register adds operations; each file of the probe adds its own.
func register(ops map[string]operation) {
	for name, op := range ops {
		operations[name] = op
	}
}

// usageError is a mistake in the probe's arguments: the test is wrong, not
// the sandbox.
type usageError string

func (e usageError) Error() string { return string(e) }

func main() {
	if len(os.Args) < 2 {
		fail("usage: probe OPERATION [ARGUMENT...]; operations: %v", names())
	}
	op, ok := operations[os.Args[1]]
	if !ok {
		fail("unknown operation %q; operations: %v", os.Args[1], names())
	}
	args := os.Args[2:]
	if op.args >= 0 && len(args) != op.args {
		fail("%s takes %d arguments, got %d", os.Args[1], op.args, len(args))
	}
	out, err := op.run(args)
	var errno syscall.Errno
	var usage usageError
	switch {
	case errors.As(err, &usage):
		fail("%s: %v", os.Args[1], err)
	case errors.As(err, &errno):
		out = "errno " + errnoName(errno)
	case err != nil:
		fail("%s: %v", os.Args[1], err)
	case out == "":
		out = "ok"
	}
	fmt.Println(out)
}

func errnoName(e syscall.Errno) string {
	if name := unix.ErrnoName(e); name != "" {
		return name
	}
	return strconv.Itoa(int(e))
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "probe: "+format+"\n", a...)
	os.Exit(2)
}

func names() []string {
	var ns []string
	for n := range operations {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

func atoi(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, usageError(fmt.Sprintf("%q is not a number", s))
	}
	return n, nil
}

// errnoOf turns the third result of a raw system call into an error.
func errnoOf(e syscall.Errno) error {
	if e != 0 {
		return e
	}
	return nil
}
