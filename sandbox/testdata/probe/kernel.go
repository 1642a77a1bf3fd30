package main

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The calls that reach the host's kernel itself are made with arguments it
// rejects, so that a call the sandbox let through shows as an error and
// never as a rebooted machine or a loaded module.
func init() {
	register(map[string]operation{
		// tiocsti pushes a byte into the input of the terminal on stdin;
		// tiocsti-high does it with bits set above the low 32 of the
		// request, which the kernel drops and a careless filter compares.
		"tiocsti":      {0, func([]string) (string, error) { return "", tiocsti(unix.TIOCSTI) }},
		"tiocsti-high": {0, func([]string) (string, error) { return "", tiocsti(1<<32 | unix.TIOCSTI) }},
		// tioclinux asks the console for its blank state, read only; on a
		// terminal that is no console the kernel answers ENOTTY or EINVAL.
		"tioclinux": {0, func([]string) (string, error) {
			sub := byte(7) // TIOCL_GETSHIFTSTATE
			_, _, e := unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCLINUX, uintptr(unsafe.Pointer(&sub)))
			return "", errnoOf(e)
		}},
		// tiocgwinsz reads the terminal's size: an ioctl every program makes.
		"tiocgwinsz": {0, func([]string) (string, error) {
			_, err := unix.IoctlGetWinsize(0, unix.TIOCGWINSZ)
			return "", err
		}},
		"io-uring-setup": {0, func([]string) (string, error) {
			var params [120]byte // struct io_uring_params, zero
			fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
			return "", closeAfter(int(fd), errnoOf(e))
		}},
		// keyctl looks up the session keyring without creating it.
		"keyctl": {0, func([]string) (string, error) {
			_, err := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_SESSION_KEYRING, 0, 0, 0)
			return "", err
		}},
		"bpf-invalid": {0, func([]string) (string, error) {
			_, _, e := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_LOAD, 0, 0)
			return "", errnoOf(e)
		}},
		// perf-self counts the probe's own user-space cycles in software,
		// which perf_event_paranoid up to 2 allows anyone.
		"perf-self": {0, func([]string) (string, error) {
			attr := unix.PerfEventAttr{
				Type:   unix.PERF_TYPE_SOFTWARE,
				Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
				Config: unix.PERF_COUNT_SW_TASK_CLOCK,
				Bits:   unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv | unix.PerfBitDisabled,
			}
			return "", closeAfter(unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC))
		}},
		// userfaultfd for user-space faults only, which needs no privilege.
		"userfaultfd": {0, func([]string) (string, error) {
			const userModeOnly = 1 // UFFD_USER_MODE_ONLY
			fd, _, e := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|userModeOnly, 0, 0)
			return "", closeAfter(int(fd), errnoOf(e))
		}},
		// reboot-invalid passes no magic numbers: EINVAL even for root.
		"reboot-invalid": {0, func([]string) (string, error) {
			_, _, e := unix.Syscall6(unix.SYS_REBOOT, 0, 0, unix.LINUX_REBOOT_CMD_POWER_OFF, 0, 0, 0)
			return "", errnoOf(e)
		}},
		// kexec-invalid loads no segments with flags no kernel knows.
		"kexec-invalid": {0, func([]string) (string, error) {
			_, _, e := unix.Syscall6(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0xdead0000, 0, 0)
			return "", errnoOf(e)
		}},
		"kexec-file-invalid": {0, func([]string) (string, error) {
			_, _, e := unix.Syscall6(unix.SYS_KEXEC_FILE_LOAD, ^uintptr(0), ^uintptr(0), 0, 0, 0xdead0000, 0)
			return "", errnoOf(e)
		}},
		// init-module-invalid offers an empty image.
		"init-module-invalid": {0, func([]string) (string, error) {
			params := []byte{0}
			_, _, e := unix.Syscall(unix.SYS_INIT_MODULE, 0, 0, uintptr(unsafe.Pointer(&params[0])))
			return "", errnoOf(e)
		}},
		"finit-module-invalid": {0, func([]string) (string, error) {
			params := []byte{0}
			_, _, e := unix.Syscall(unix.SYS_FINIT_MODULE, ^uintptr(0), uintptr(unsafe.Pointer(&params[0])), 0)
			return "", errnoOf(e)
		}},
		"delete-module-invalid": {0, func([]string) (string, error) {
			name := []byte("kairo_probe_no_such_module\x00")
			_, _, e := unix.Syscall(unix.SYS_DELETE_MODULE, uintptr(unsafe.Pointer(&name[0])), 0, 0)
			return "", errnoOf(e)
		}},
		// open-by-handle-invalid opens an empty handle on a bad mount fd.
		"open-by-handle-invalid": {0, func([]string) (string, error) {
			var handle [8]byte // struct file_handle with no bytes
			_, _, e := unix.Syscall(unix.SYS_OPEN_BY_HANDLE_AT, ^uintptr(0), uintptr(unsafe.Pointer(&handle[0])), unix.O_RDONLY)
			return "", errnoOf(e)
		}},
		"swapon-invalid": {0, func([]string) (string, error) {
			path := []byte("/nonexistent-kairo-probe\x00")
			_, _, e := unix.Syscall(unix.SYS_SWAPON, uintptr(unsafe.Pointer(&path[0])), 0, 0)
			return "", errnoOf(e)
		}},
		// syslog-size asks for the size of the kernel's log buffer.
		"syslog-size": {0, func([]string) (string, error) {
			_, _, e := unix.Syscall(unix.SYS_SYSLOG, unix.SYSLOG_ACTION_SIZE_BUFFER, 0, 0)
			return "", errnoOf(e)
		}},
		// settimeofday-invalid sets no time and no valid zone.
		"settimeofday-invalid": {0, func([]string) (string, error) {
			_, _, e := unix.Syscall(unix.SYS_SETTIMEOFDAY, 0, 0, 0)
			return "", errnoOf(e)
		}},
	})
}

// tiocsti makes the terminal on stdin the probe's controlling terminal
// (TIOCSTI needs that, or CAP_SYS_ADMIN) and pushes a byte into its input
// with request req.
func tiocsti(req uintptr) error {
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCSCTTY, 0); e != 0 && e != unix.EPERM {
		return e
	}
	b := byte('\n')
	_, _, e := unix.Syscall(unix.SYS_IOCTL, 0, req, uintptr(unsafe.Pointer(&b)))
	return errnoOf(e)
}
