package host_test

import (
	"os"
	"testing"

	"github.com/kairo-os/kairo/sandbox"
)

// The daemons of these tests spawn their processes through this test
// binary as the sandbox helper, as a program that embeds Kairo does: the
// hook comes first (the Example shows it in a program's main).
func TestMain(m *testing.M) {
	if sandbox.IsHelper() {
		sandbox.HelperMain() // confine this process and exec the target; never returns
	}
	os.Exit(m.Run())
}
