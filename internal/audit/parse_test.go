package audit

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
)

// replay feeds the records of testdata/records.txt (captured from this
// kind of kernel, see the file's head) through an assembler, all at the
// same instant, ends what is left, and returns the refusals in the order
// they came out.
func replay(t *testing.T, file string) []Denial {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []Denial
	a := newAssembler(256, func(d Denial) { got = append(got, d) })
	now := time.Now()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		typ, text, _ := strings.Cut(line, " ")
		n, err := strconv.Atoi(typ)
		if err != nil {
			t.Fatalf("line %q: no record type", line)
		}
		rec, ok := parseRecord(uint16(n), text)
		if !ok {
			t.Fatalf("line %q: not a record", line)
		}
		a.add(rec, now)
	}
	a.flush(time.Time{})
	return got
}

// TestParseCapturedRecords reads real Landlock and seccomp records into
// the refusals kairo reports: the operation and object of each, the
// refused process and its uid from the event's SYSCALL record, hex paths
// decoded, the domain's maker from its allocation record, and no report
// of the sandbox's own clone3 refusal nor of a domain's end.
func TestParseCapturedRecords(t *testing.T) {
	const uid = 2146435073
	got := replay(t, "testdata/records.txt")
	probe := "/srv/kairo audit probe"
	want := []Denial{
		{PID: 17515, Op: abi.DeniedWrite, Object: "/etc", Detail: "fs.make_reg", Domain: "1851233d2", DomainPID: 17515, Exe: "/usr/bin/dash"},
		{PID: 17519, Op: abi.DeniedRead, Object: "/etc/locale.alias", Detail: "fs.read_file", Domain: "1851233d2", DomainPID: 17515, Exe: "/usr/bin/ls"},
		{PID: 17520, Op: abi.DeniedRead, Object: "/etc/locale.alias", Detail: "fs.read_file", Domain: "1851233d2", DomainPID: 17515, Exe: "/usr/bin/cat"},
		{PID: 17521, Op: abi.DeniedRead, Object: "/etc/locale.alias", Detail: "fs.read_file", Domain: "1851233d2", DomainPID: 17515, Exe: "/usr/bin/rm"},
		{PID: 17521, Op: abi.DeniedWrite, Object: "/etc", Detail: "fs.remove_file", Domain: "1851233d2", DomainPID: 17515, Exe: "/usr/bin/rm"},
		{PID: 17522, Op: abi.DeniedRead, Object: "/etc/locale.alias", Detail: "fs.read_file", Domain: "1851233d2", DomainPID: 17515, Exe: "/usr/bin/ln"},
		{PID: 17522, Op: abi.DeniedWrite, Object: "/etc", Detail: "fs.make_sym", Domain: "1851233d2", DomainPID: 17515, Exe: "/usr/bin/ln"},
		// The domain was freed (serial 241): later records of it would
		// no longer name its maker.
		{PID: 22700, Op: abi.DeniedRead, Object: "/etc/locale.alias", Detail: "fs.read_file", Domain: "1851234b0", DomainPID: 22696, Exe: "/usr/bin/cat"},
		{PID: 22700, Op: abi.DeniedRead, Object: probe + "/f", Detail: "fs.read_file", Domain: "1851234b0", DomainPID: 22696, Exe: "/usr/bin/cat"},
		{PID: 22701, Op: abi.DeniedRead, Object: "/etc/locale.alias", Detail: "fs.read_file", Domain: "1851234b0", DomainPID: 22696, Exe: "/usr/bin/ls"},
		{PID: 22701, Op: abi.DeniedRead, Object: probe, Detail: "fs.read_dir", Domain: "1851234b0", DomainPID: 22696, Exe: "/usr/bin/ls"},
		{PID: 22702, Op: abi.DeniedExec, Object: probe + "/x.sh", Detail: "fs.execute,fs.read_file", Domain: "1851234b0", DomainPID: 22696, Exe: "/usr/bin/dash"},
		{PID: 22703, Op: abi.DeniedWrite, Object: "/dev/tty", Detail: "fs.write_file,fs.read_file", Domain: "1851234b0", DomainPID: 22696, Exe: "/usr/bin/bash"},
		{PID: 22703, Op: abi.DeniedRead, Object: "/etc/locale.alias", Detail: "fs.read_file", Domain: "1851234b0", DomainPID: 22696, Exe: "/usr/bin/bash"},
		{PID: 22703, Op: abi.DeniedConnectTCP, Object: "80", Detail: "net.connect_tcp", Domain: "1851234b0", DomainPID: 22696, Exe: "/usr/bin/bash"},
		{PID: 22704, Op: abi.DeniedRead, Object: "/etc/locale.alias", Detail: "fs.read_file", Domain: "1851234b0", DomainPID: 22696, Exe: "/usr/bin/perl"},
		{PID: 22704, Op: abi.DeniedWrite, Object: "/dev/null", Detail: "fs.ioctl_dev", Domain: "1851234b0", DomainPID: 22696, Exe: "/usr/bin/perl"},
		{PID: 22704, Op: abi.DeniedBindTCP, Object: "8080", Detail: "net.bind_tcp", Domain: "1851234b0", DomainPID: 22696, Exe: "/usr/bin/perl"},
		{PID: 22705, Op: abi.DeniedRead, Object: "/etc/locale.alias", Detail: "fs.read_file", Domain: "1851234b0", DomainPID: 22696, Exe: "/usr/bin/unshare"},
		// Alone, without EOE: it ends with the flush.
		{PID: 22705, Op: abi.DeniedSyscall, Object: "unshare", Detail: "errno", Reporter: ReporterSeccomp, Exe: "/usr/bin/unshare"},
	}
	for i := range want {
		want[i].UID = uid
		if want[i].Reporter == "" {
			want[i].Reporter = ReporterLandlock
		}
	}
	if len(got) != len(want) {
		for _, d := range got {
			t.Logf("got %+v", d)
		}
		t.Fatalf("got %d refusals, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("refusal %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

// TestValueDecodes checks the two forms the kernel writes a string in,
// and an abstract unix socket's name.
func TestValueDecodes(t *testing.T) {
	for raw, want := range map[string]string{
		`"/etc"`: "/etc",
		"2F7372762F6B6169726F2061756469742070726F62652F66": "/srv/kairo audit probe/f",
		"006B6169726F2D70726F6265":                         "@kairo-probe",
		"(null)":                                           "(null)",
		"ABC":                                              "ABC", // odd length: not hex
	} {
		if got := value(raw); got != want {
			t.Errorf("value(%q) = %q, want %q", raw, got, want)
		}
	}
}

// TestLandlockOps maps every blocker the kernel names (security/landlock/
// audit.c) to its operation.
func TestLandlockOps(t *testing.T) {
	for blockers, want := range map[string]string{
		"fs.execute": abi.DeniedExec, "fs.write_file": abi.DeniedWrite, "fs.read_file": abi.DeniedRead,
		"fs.read_dir": abi.DeniedRead, "fs.remove_dir": abi.DeniedWrite, "fs.remove_file": abi.DeniedWrite,
		"fs.make_char": abi.DeniedWrite, "fs.make_dir": abi.DeniedWrite, "fs.make_reg": abi.DeniedWrite,
		"fs.make_sock": abi.DeniedWrite, "fs.make_fifo": abi.DeniedWrite, "fs.make_block": abi.DeniedWrite,
		"fs.make_sym": abi.DeniedWrite, "fs.refer": abi.DeniedWrite, "fs.truncate": abi.DeniedWrite,
		"fs.ioctl_dev": abi.DeniedWrite, "net.bind_tcp": abi.DeniedBindTCP, "net.connect_tcp": abi.DeniedConnectTCP,
		"scope.signal": abi.DeniedOther, "scope.abstract_unix_socket": abi.DeniedOther, "ptrace": abi.DeniedOther,
		"fs.change_topology": abi.DeniedOther, "fs.refer,fs.make_reg": abi.DeniedWrite,
	} {
		if got := landlockOp(blockers); got != want {
			t.Errorf("landlockOp(%q) = %q, want %q", blockers, got, want)
		}
	}
}
