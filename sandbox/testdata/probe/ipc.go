package main

import (
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel objects that outlive the process that made them (System V IPC,
// POSIX message queues), the neighbours a sandbox keeps (pipes, a shared
// mapping of a file in its workspace), and memfds.
func init() {
	register(map[string]operation{
		// shmget BYTES makes a private System V shared memory segment and
		// removes it at once: a segment left behind would outlive the test.
		"shmget": {1, func(a []string) (string, error) {
			n, err := atoi(a[0])
			if err != nil {
				return "", err
			}
			id, err := unix.SysvShmGet(unix.IPC_PRIVATE, n, unix.IPC_CREAT|0o600)
			if err != nil {
				return "", err
			}
			_, err = unix.SysvShmCtl(id, unix.IPC_RMID, nil)
			return "", err
		}},
		// msgget makes a private System V message queue, mode 0666, and
		// removes it.
		"msgget": {0, func([]string) (string, error) {
			id, _, e := unix.RawSyscall(unix.SYS_MSGGET, unix.IPC_PRIVATE, unix.IPC_CREAT|0o666, 0)
			if e != 0 {
				return "", e
			}
			_, _, e = unix.RawSyscall(unix.SYS_MSGCTL, id, unix.IPC_RMID, 0)
			return "", errnoOf(e)
		}},
		// semget makes a private set of one System V semaphore and removes
		// it.
		"semget": {0, func([]string) (string, error) {
			id, _, e := unix.RawSyscall(unix.SYS_SEMGET, unix.IPC_PRIVATE, 1, unix.IPC_CREAT|0o600)
			if e != 0 {
				return "", e
			}
			_, _, e = unix.RawSyscall6(unix.SYS_SEMCTL, id, 0, unix.IPC_RMID, 0, 0, 0)
			return "", errnoOf(e)
		}},
		// mq-open NAME makes the POSIX message queue NAME, mode 0666, and
		// unlinks it. The name has no slash: mq_open(3) strips its leading
		// one before the system call.
		"mq-open": {1, func(a []string) (string, error) {
			name, err := unix.BytePtrFromString(a[0])
			if err != nil {
				return "", usageError(err.Error())
			}
			fd, _, e := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(name)), unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o666, 0, 0, 0)
			if e != 0 {
				return "", e
			}
			unix.Close(int(fd))
			_, _, e = unix.Syscall(unix.SYS_MQ_UNLINK, uintptr(unsafe.Pointer(name)), 0, 0)
			return "", errnoOf(e)
		}},
		// pipe sends a byte through a pipe.
		"pipe": {0, func([]string) (string, error) {
			var p [2]int
			if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
				return "", err
			}
			defer unix.Close(p[0])
			defer unix.Close(p[1])
			if _, err := unix.Write(p[1], []byte{'x'}); err != nil {
				return "", err
			}
			_, err := unix.Read(p[0], make([]byte, 1))
			return "", err
		}},
		// shm-file PATH BYTES makes PATH that size and maps it shared, as
		// POSIX shared memory is: a file, which the sandbox may make in its
		// workspace.
		"shm-file": {2, func(a []string) (string, error) {
			n, err := atoi(a[1])
			if err != nil {
				return "", err
			}
			fd, err := unix.Open(a[0], unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
			if err != nil {
				return "", err
			}
			defer unix.Close(fd)
			if err := unix.Ftruncate(fd, int64(n)); err != nil {
				return "", err
			}
			b, err := unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			if err != nil {
				return "", err
			}
			b[0] = 1
			return "", unix.Munmap(b)
		}},
		// memfd-create FLAGS makes a memfd with FLAGS (a number, 0x for hex).
		"memfd-create": {1, func(a []string) (string, error) {
			flags, err := strconv.ParseUint(a[0], 0, 32)
			if err != nil {
				return "", usageError(err.Error())
			}
			return "", closeAfter(unix.MemfdCreate("probe", int(flags)))
		}},
		// memfd-sealed-exec OP [ARG...] writes a copy of the probe to a memfd
		// made with MFD_NOEXEC_SEAL and runs it with OP... through execveat.
		"memfd-sealed-exec": {-1, func(a []string) (string, error) {
			if len(a) < 1 {
				return "", usageError("memfd-sealed-exec OP [ARG...]")
			}
			fd, err := sealedCopy()
			if err != nil {
				return "", err
			}
			return "", execveat(fd, append([]string{"probe"}, a...), os.Environ())
		}},
		// memfd-sealed-proc-exec OP [ARG...] does the same through
		// /proc/self/fd/N.
		"memfd-sealed-proc-exec": {-1, func(a []string) (string, error) {
			if len(a) < 1 {
				return "", usageError("memfd-sealed-proc-exec OP [ARG...]")
			}
			fd, err := sealedCopy()
			if err != nil {
				return "", err
			}
			path := "/proc/self/fd/" + strconv.Itoa(fd)
			return "", unix.Exec(path, append([]string{"probe"}, a...), os.Environ())
		}},
		// memfd-sealed-chmod makes a sealed memfd executable by its mode.
		"memfd-sealed-chmod": {0, func([]string) (string, error) {
			fd, err := unix.MemfdCreate("probe", unix.MFD_CLOEXEC|unix.MFD_NOEXEC_SEAL)
			if err != nil {
				return "", err
			}
			defer unix.Close(fd)
			return "", unix.Fchmod(fd, 0o755)
		}},
		// write-execveat PATH OP [ARG...] writes a copy of the probe to PATH,
		// opens it, and runs it with OP... through execveat(AT_EMPTY_PATH):
		// the descriptor, not the path, names what runs.
		"write-execveat": {-1, func(a []string) (string, error) {
			if len(a) < 2 {
				return "", usageError("write-execveat PATH OP [ARG...]")
			}
			if err := copySelf(a[0]); err != nil {
				return "", err
			}
			fd, err := unix.Open(a[0], unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return "", err
			}
			return "", execveat(fd, append([]string{"probe"}, a[1:]...), os.Environ())
		}},
		// execveat-path PATH OP [ARG...] opens PATH and runs it with OP...
		// through execveat(AT_EMPTY_PATH).
		"execveat-path": {-1, func(a []string) (string, error) {
			if len(a) < 2 {
				return "", usageError("execveat-path PATH OP [ARG...]")
			}
			fd, err := unix.Open(a[0], unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return "", err
			}
			return "", execveat(fd, append([]string{"probe"}, a[1:]...), os.Environ())
		}},
		// proc-pids prints "ok" when /proc lists no process but this one,
		// else the others.
		"proc-pids": {0, func([]string) (string, error) { return procPIDs() }},
	})
}

// sealedCopy is a memfd made with MFD_NOEXEC_SEAL holding a copy of the
// probe.
func sealedCopy() (int, error) {
	fd, err := unix.MemfdCreate("probe", unix.MFD_NOEXEC_SEAL) // not close-on-exec: /proc/self/fd/N must stay
	if err != nil {
		return 0, err
	}
	if err := copySelfTo(os.NewFile(uintptr(fd), "memfd")); err != nil {
		return 0, err
	}
	return fd, nil
}

func procPIDs() (string, error) {
	dir, err := unix.Open("/proc", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(dir)
	self := strconv.Itoa(os.Getpid())
	buf := make([]byte, 1<<16)
	var others []string
	for {
		n, err := unix.Getdents(dir, buf)
		if err != nil {
			return "", err
		}
		if n == 0 {
			break
		}
		_, _, names := unix.ParseDirent(buf[:n], -1, nil)
		for _, name := range names {
			if _, err := strconv.Atoi(name); err == nil && name != self {
				others = append(others, name)
			}
		}
	}
	if len(others) > 0 {
		if len(others) > 5 {
			return "pids " + strconv.Itoa(len(others)) + " others", nil
		}
		return "pids " + strings.Join(others, " "), nil
	}
	return "", nil
}
