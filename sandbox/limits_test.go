package sandbox

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestHelperUnderTightLimits: the helper, a Go program, sets the limits
// last and allocates nothing after them, so it reaches the exec under
// limits far below what its own runtime would need to start; the target
// runs under them (the shell reports them) — twenty times in a row, as an
// allocation after the limit failed only now and then.
func TestHelperUnderTightLimits(t *testing.T) {
	e := newEscapeEnv(t)
	p := e.policy(func(p *Policy) {
		p.Limits.Memory = 16 << 20
		p.Limits.OpenFiles = 16
		p.Limits.FileSize = 1 << 20
	})
	for range 20 {
		c, err := Command(os.Args[0], p, []string{"/bin/sh", "-c", "ulimit -v; ulimit -n; ulimit -f"})
		if err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		c.Stdout, c.Stderr = &out, &errb
		err = c.Start()
		if serr := c.Started(); serr != nil {
			t.Fatalf("the sandbox did not start: %v", serr)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(); err != nil {
			t.Fatalf("%v: %s", err, errb.String())
		}
		// ulimit -v and -f count KiB and 512-byte blocks.
		if got := strings.Fields(out.String()); strings.Join(got, " ") != "16384 16 2048" {
			t.Fatalf("limits seen by the target: %q, want 16384 16 2048", out.String())
		}
	}
}
