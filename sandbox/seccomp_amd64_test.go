package sandbox

import (
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func init() {
	seccompProbes["abi/x32"] = func() error {
		return rawErr(unix.RawSyscall(x32Bit|unix.SYS_GETPID, 0, 0, 0))
	}
	seccompProbes["abi/int80"] = int80Getpid
}

// int80Getpid calls getpid through the i386 ABI (int 0x80), which a 64-bit
// process can still enter. Go emits that instruction only from an assembly
// file, and an assembly file would be built into the package proper (there
// are no _test.s files), so the test writes the three instructions into an
// executable page and calls them as a Go func.
func int80Getpid() error {
	code := []byte{
		0xb8, 0x14, 0x00, 0x00, 0x00, // mov eax, 20: getpid in the i386 table
		0xcd, 0x80, // int 0x80
		0xc3, // ret; Go's internal ABI keeps nothing in eax across a call
	}
	mem, err := unix.Mmap(-1, 0, unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return err
	}
	copy(mem, code)
	if err := unix.Mprotect(mem, unix.PROT_READ|unix.PROT_EXEC); err != nil {
		return err
	}
	// A func value points at a word holding the code's address.
	entry := uintptr(unsafe.Pointer(&mem[0]))
	fv := &entry
	call := *(*func())(unsafe.Pointer(&fv))
	call()
	return unix.Munmap(mem)
}

// TestSeccompKillsOtherABIs enters the kernel through the x32 and i386
// ABIs, whose syscall numbers the filter does not check: the process must
// die by SIGSYS, after a native getpid in the same run went through.
func TestSeccompKillsOtherABIs(t *testing.T) {
	for _, probe := range []string{"abi/x32", "abi/int80"} {
		t.Run(probe, func(t *testing.T) {
			base := runSeccompChild(t, seccompChildSpec{Probes: []string{probe}})
			// The fault kills the child, or Go's handler turns it into a
			// fatal error (it does under the race detector).
			ws := base.state.Sys().(syscall.WaitStatus)
			faulted := ws.Signaled() && ws.Signal() == syscall.SIGSEGV || strings.Contains(base.output, "signal SIGSEGV")
			if probe == "abi/int80" && faulted {
				t.Skip("this kernel runs no i386 code (ia32_emulation off): int 0x80 faults")
			}
			if !base.state.Success() {
				t.Fatalf("without the filter the child failed (%v):\n%s", base.state, base.output)
			}
			t.Logf("without the filter, %s: %s", probe, errnoText(base.results[probe]))

			run := runSeccompChild(t, seccompChildSpec{Filter: true, Policy: FilterPolicy{TCP: true, UDP: true, Unix: true},
				Probes: []string{"getpid", probe}})
			if got, ok := run.results["getpid"]; !ok || got != 0 {
				t.Fatalf("getpid under the filter: %s (reported: %v)\n%s", errnoText(got), ok, run.output)
			}
			if ws := run.state.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGSYS {
				t.Fatalf("child ended with %v; want killed by SIGSYS\n%s", run.state, run.output)
			}
			if _, ok := run.results[probe]; ok {
				t.Fatalf("%s returned under the filter; want the process killed", probe)
			}
		})
	}
}
