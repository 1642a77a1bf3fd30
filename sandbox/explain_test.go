package sandbox

import (
	"bytes"
	"strings"
	"testing"
)

// TestCheckReportsProcGap: what only a root kernel gives (the sandbox's own
// /proc, a process limit of the tree's own) is said to be missing when the
// kernel is not root, by `kairo sandbox check` and by an explanation; and
// said to be there when it is.
func TestCheckReportsProcGap(t *testing.T) {
	for _, c := range []struct {
		root bool
		want []string
	}{
		{true, []string{"/proc                                  the sandbox's own (hidepid=invisible,subset=pid)", "no System V IPC", "processes 256"}},
		{false, []string{"/proc                                  NOT enforced", "the process limit counts every process of uid"}},
	} {
		var b bytes.Buffer
		WriteCheck(&b, Features{LandlockABI: 7, Seccomp: true, NoNewPrivs: true, Root: c.root, MemfdNoExecSeal: true})
		for _, want := range c.want {
			if !strings.Contains(b.String(), want) {
				t.Errorf("check (root %v) does not say %q:\n%s", c.root, want, b.String())
			}
		}
	}

	p := Default("/work", "/tmp", nil)
	if g := gaps(p, true); len(g) != 0 {
		t.Errorf("gaps of a root kernel: %q, want none", g)
	}
	g := strings.Join(gaps(p, false), "\n")
	for _, want := range []string{"/proc: the host's", "processes: the limit of 256 counts every process of uid"} {
		if !strings.Contains(g, want) {
			t.Errorf("gaps of a kernel that is not root do not say %q:\n%s", want, g)
		}
	}
	if hidesProc() {
		var b bytes.Buffer
		Explain(&b, p, "/bin/true")
		if !strings.Contains(b.String(), "/proc        the sandbox's own") || strings.Contains(b.String(), "NOT enforced") {
			t.Errorf("explain as root:\n%s", b.String())
		}
	}
}
