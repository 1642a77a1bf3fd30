package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// usageError is a command line kairo cannot read: exit code 2.
type usageError struct {
	msg      string
	synopsis string // the command's usage line, printed after msg
}

func (e *usageError) Error() string { return e.msg }

var (
	// errHelpShown: -h printed the help; exit 0.
	errHelpShown = errors.New("help shown")
	// errUsageShown: the flag package already said what was wrong; exit 2.
	errUsageShown = errors.New("usage shown")
)

// cmdFlags is a subcommand's flag set and its help text.
type cmdFlags struct {
	*flag.FlagSet
	synopsis string // "kairo events tail [flags] [PATTERN]"
	help     string
}

func newFlags(name, synopsis, help string) *cmdFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	f := &cmdFlags{FlagSet: fs, synopsis: synopsis, help: help}
	// parse prints the help (for -h) or a short pointer (after the flag
	// package's own message about a bad flag).
	fs.Usage = func() {}
	return f
}

func (f *cmdFlags) printHelp(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", f.synopsis, strings.TrimSpace(f.help))
	n := 0
	f.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprint(w, "\nflags:\n")
		f.SetOutput(w)
		f.PrintDefaults()
		f.SetOutput(os.Stderr)
	}
}

// parse reads flags anywhere among the arguments ("tail 'a.>' --json" as well
// as "tail --json 'a.>'") and returns the positional ones; "--" ends the
// flags, so a JSON argument that starts with '-' goes after it.
func (f *cmdFlags) parse(args []string, minPos, maxPos int) ([]string, error) {
	var pos []string
	for {
		if err := f.parseFlags(args); err != nil {
			return nil, err
		}
		rest := f.Args()
		if len(rest) == 0 {
			break
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	switch {
	case len(pos) < minPos:
		return nil, &usageError{msg: "missing arguments", synopsis: f.synopsis}
	case maxPos >= 0 && len(pos) > maxPos:
		return nil, &usageError{msg: fmt.Sprintf("too many arguments: %q", pos[maxPos:]), synopsis: f.synopsis}
	}
	return pos, nil
}

// parseArgv reads flags up to the first argument that is not one, or "--",
// and returns the rest as a command line that keeps its own flags: in
// "kairo spawn ls -l", -l is ls's.
func (f *cmdFlags) parseArgv(args []string) ([]string, error) {
	if err := f.parseFlags(args); err != nil {
		return nil, err
	}
	if f.NArg() == 0 {
		return nil, &usageError{msg: "missing the command to run", synopsis: f.synopsis}
	}
	return f.Args(), nil
}

// parseFlags is one pass of the flag package, with kairo's help and
// messages.
func (f *cmdFlags) parseFlags(args []string) error {
	err := f.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		f.printHelp(os.Stdout)
		return errHelpShown
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "usage: %s\nRun \"kairo %s -h\" for help.\n", f.synopsis, f.Name())
		return errUsageShown
	}
	return nil
}
