// Command historygen writes a Kairo home's history (package history) in a
// process of its own: a test built with -race would take minutes to run
// SQLite's transpiled C through the race detector.
//
//	historygen HOME EVENTS RUNLOOPS
//
// It prints what it wrote as JSON.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/kairo-os/kairo/internal/testkit/history"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "historygen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("usage: historygen HOME EVENTS RUNLOOPS")
	}
	events, err := strconv.Atoi(args[1])
	if err != nil {
		return fmt.Errorf("EVENTS %q: %w", args[1], err)
	}
	loops, err := strconv.Atoi(args[2])
	if err != nil {
		return fmt.Errorf("RUNLOOPS %q: %w", args[2], err)
	}
	w, err := history.WriteHere(args[0], events, loops)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(w)
}
