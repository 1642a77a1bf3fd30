package audit

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/kairo-os/kairo/sandbox"
)

// holderEnv makes the test binary a Hold's owner in a process of its own
// (startHolder), for the tests of the count across processes.
const holderEnv = "KAIRO_AUDIT_TEST_HOLDER"

// The test binary doubles as the sandbox helper (sandbox.Command with
// os.Args[0]) and as a process that holds audit (holderEnv).
func TestMain(m *testing.M) {
	if sandbox.IsHelper() {
		sandbox.HelperMain()
	}
	if dir := os.Getenv(holderEnv); dir != "" {
		os.Exit(holdUntilStdinCloses(dir))
	}
	os.Exit(m.Run())
}

// holdUntilStdinCloses acquires a Hold in dir, says so on stdout, and
// releases it when its stdin closes, unless it is killed first.
func holdUntilStdinCloses(dir string) int {
	h, err := Acquire(dir, true)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Printf("held turnedOn=%v\n", h.State.TurnedOn)
	io.Copy(io.Discard, os.Stdin)
	if err := h.Release(); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		return 1
	}
	return 0
}

// readLine is the next line of r, without its newline.
func readLine(r *bufio.Reader) (string, error) {
	s, err := r.ReadString('\n')
	if len(s) > 0 && s[len(s)-1] == '\n' {
		s = s[:len(s)-1]
	}
	return s, err
}
