package audit

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sandbox"
)

// collector gathers a Reader's refusals of one uid.
type collector struct {
	uid int
	mu  sync.Mutex
	got []Denial
	new chan struct{}
}

func (c *collector) add(d Denial) {
	if d.UID != c.uid {
		return // another test's or daemon's sandbox
	}
	c.mu.Lock()
	c.got = append(c.got, d)
	c.mu.Unlock()
	select {
	case c.new <- struct{}{}:
	default:
	}
}

// wait returns the first refusal match accepts, or nil after timeout.
func (c *collector) wait(match func(Denial) bool, timeout time.Duration) *Denial {
	deadline := time.After(timeout)
	for {
		c.mu.Lock()
		for _, d := range c.got {
			if match(d) {
				c.mu.Unlock()
				return &d
			}
		}
		c.mu.Unlock()
		select {
		case <-c.new:
		case <-deadline:
			return nil
		}
	}
}

// runSandboxed runs script with /bin/sh under the default profile (write
// only to dir) as uid, and returns its combined output and error.
func runSandboxed(t *testing.T, dir string, uid int, script string) (string, error) {
	t.Helper()
	p := sandbox.Default(dir, dir, nil)
	p.LogDenials = true
	p.UID, p.GID = uid, uid
	cmd, err := sandbox.Command(os.Args[0], p, []string{"/bin/sh", "-c", script})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Start()
	if serr := cmd.Started(); serr != nil {
		t.Fatalf("start the sandboxed shell: %v", serr)
	}
	if err == nil {
		err = cmd.Wait()
	}
	return out.String(), err
}

// TestReaderReportsLandlockRefusal runs a sandboxed shell that may write
// only in its own folder, with audit on: its write in /etc is refused,
// and the Reader reports the refusal — a write on the folder /etc, where
// the file could not be made — with the sandbox's uid; the same shell
// writing in its folder succeeds and makes no report.
func TestReaderReportsLandlockRefusal(t *testing.T) {
	needAuditControl(t)
	if sandbox.LandlockABI() < 7 {
		t.Skipf("Landlock ABI %d logs no refusal after exec; it takes 7", sandbox.LandlockABI())
	}
	h, err := Acquire(DefaultDir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	// A uid of no account and clear of the daemons' default range
	// (0x7fe00000 and 65536 up), unique to this test process.
	uid := 0x7ff00000 + os.Getpid()%0x10000
	c := &collector{uid: uid, new: make(chan struct{}, 1)}
	var lostMu sync.Mutex
	var lost []string
	r, err := Open(Config{OnDenial: c.add, OnLost: func(n int, why string) {
		lostMu.Lock()
		lost = append(lost, why)
		lostMu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	// Not t.TempDir: its parent is closed to other uids.
	dir, err := os.MkdirTemp("", "kairo-audit-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	granted := filepath.Join(dir, "granted")
	if out, err := runSandboxed(t, dir, uid, "echo x > "+granted); err != nil {
		t.Fatalf("the write in the granted folder failed: %v\n%s", err, out)
	}
	const probe = "/etc/kairo-audit-probe"
	os.Remove(probe)
	out, err := runSandboxed(t, dir, uid, "echo x > "+probe)
	if err == nil || !strings.Contains(out, "Permission denied") {
		t.Fatalf("the write in /etc: %v, %q; want it refused", err, out)
	}
	if _, err := os.Stat(probe); err == nil {
		os.Remove(probe)
		t.Fatalf("%s exists: the sandbox let the write through", probe)
	}

	d := c.wait(func(d Denial) bool { return d.Object == "/etc" }, 5*time.Second)
	if d == nil {
		lostMu.Lock()
		defer lostMu.Unlock()
		t.Fatalf("no refusal of /etc for uid %d within 5s (got %+v; lost: %q)", uid, c.got, lost)
	}
	want := Denial{Op: abi.DeniedWrite, Object: "/etc", Detail: "fs.make_reg", Reporter: ReporterLandlock, UID: uid}
	if d.Op != want.Op || d.Detail != want.Detail || d.Reporter != want.Reporter || d.PID <= 0 || d.Domain == "" {
		t.Errorf("the refusal: %+v; want %+v with a pid and a domain", *d, want)
	}
	// A system call the seccomp filter refuses is reported too: the
	// sandbox loads its filter with SECCOMP_FILTER_FLAG_LOG.
	if _, err := os.Stat("/usr/bin/unshare"); err == nil {
		runSandboxed(t, dir, uid, "unshare -U true")
		s := c.wait(func(d Denial) bool { return d.Reporter == ReporterSeccomp }, 5*time.Second)
		switch {
		case s == nil:
			t.Errorf("no seccomp refusal of unshare for uid %d within 5s", uid)
		case s.Op != abi.DeniedSyscall || s.Object != "unshare" || s.Detail != "errno" || s.PID <= 0:
			t.Errorf("the seccomp refusal: %+v; want op %s of unshare, errno, with a pid", *s, abi.DeniedSyscall)
		}
	}
	// The granted write came first, so its records, had there been any,
	// would have ended by now.
	time.Sleep(200 * time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range c.got {
		if strings.HasPrefix(x.Object, dir) {
			t.Errorf("a refusal in the granted folder: %+v", x)
		}
	}
}

// TestReaderCloses opens and closes a Reader with nothing to read: Close
// ends its goroutine and returns.
func TestReaderCloses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("listening to the audit log needs CAP_AUDIT_READ")
	}
	r, err := Open(Config{OnDenial: func(Denial) {}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5s")
	}
}

// TestReaderCountsLargeRecords reads with a buffer smaller than the
// records the kernel sends: each is skipped, counted and told to OnLost,
// never silently dropped. (Turning audit on when it is on already logs a
// configuration change, a record of about 100 bytes.)
func TestReaderCountsLargeRecords(t *testing.T) {
	needAuditControl(t)
	h, err := Acquire(DefaultDir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	told := make(chan string, 16)
	r, err := Open(Config{OnDenial: func(Denial) {}, MaxRecord: 32, OnLost: func(n int, why string) {
		select {
		case told <- why:
		default:
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := SetEnabled(true); err != nil {
		t.Fatal(err)
	}
	select {
	case why := <-told:
		if !strings.Contains(why, "over the 32 read") {
			t.Errorf("OnLost said %q; want the record's size and the 32 bytes read", why)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no record was reported lost within 5s")
	}
	if r.Lost() == 0 {
		t.Error("Lost() is 0 after OnLost was told")
	}
}
