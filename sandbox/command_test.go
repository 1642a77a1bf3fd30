package sandbox

import (
	"errors"
	"os"
	"testing"
)

// TestHandoffCommandRefusesStart: a command made for a warm helper has no
// policy pipe, so starting it as a helper of its own is refused before
// any process runs, saying what to use instead; the control, Command's,
// starts and runs its target. (Its handoff is run by the warm escape
// tests, through runWarmFiltered.)
func TestHandoffCommandRefusesStart(t *testing.T) {
	dir := t.TempDir()
	p := Default(dir, dir, nil)
	if os.Geteuid() == 0 {
		uid := takeEscapeUIDs(t)
		p.UID, p.GID = uid, uid
		os.Chmod(dir, 0o777)
	}
	h, err := HandoffCommand(os.Args[0], p, []string{"/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	err = h.Start()
	if serr := h.Started(); serr != nil {
		t.Errorf("Started after a refused Start: %v, want nil (nothing ran)", serr)
	}
	if !errors.Is(err, errHandoffOnly) || h.Process != nil {
		t.Fatalf("Start of a HandoffCommand: %v (process %v), want it refused with %q", err, h.Process, errHandoffOnly)
	}

	c, err := Command(os.Args[0], p, []string{"/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Start()
	if serr := c.Started(); serr != nil {
		t.Fatalf("Command's helper did not start /bin/true: %v", serr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("/bin/true under Command's helper: %v", err)
	}
}
