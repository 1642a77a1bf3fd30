package client_test

import (
	"os"
	"testing"

	"github.com/kairo-os/kairo/sandbox"
)

// The examples and tests run a daemon in this test binary, whose sandbox
// helper is the binary itself: as in a program that embeds Kairo, the
// hook comes first.
func TestMain(m *testing.M) {
	if sandbox.IsHelper() {
		sandbox.HelperMain() // confine this process and exec the target; never returns
	}
	os.Exit(m.Run())
}
