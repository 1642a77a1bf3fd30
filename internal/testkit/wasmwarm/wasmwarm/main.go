// Command wasmwarm compiles plugin modules into a compilation cache
// (package wasmwarm) in a process of its own: a test built with -race would
// run wazero's compiler through the race detector.
//
//	wasmwarm CACHEDIR trusted:PATH|metered:PATH...
package main

import (
	"fmt"
	"os"

	"github.com/kairo-os/kairo/internal/testkit/wasmwarm"
)

func main() {
	if err := wasmwarm.WarmHere(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "wasmwarm:", err)
		os.Exit(1)
	}
}
