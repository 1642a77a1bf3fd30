package sandbox

import (
	"os"
	"testing"
)

// The test binary doubles as the sandbox helper: Command(os.Args[0], ...)
// starts it with HelperArg, and it confines itself and execs the target.
func TestMain(m *testing.M) {
	if IsHelper() {
		HelperMain()
	}
	os.Exit(m.Run())
}
