package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func init() {
	register(map[string]operation{
		"noop":      {0, func([]string) (string, error) { return "", nil }},
		"open-read": {1, func(a []string) (string, error) { return "", openRead(a[0]) }},
		// open opens for reading and reads nothing: /proc/PID/mem checks at
		// open, and reading its first page fails for every process.
		"open": {1, func(a []string) (string, error) {
			return "", closeAfter(unix.Open(a[0], unix.O_RDONLY|unix.O_CLOEXEC, 0))
		}},
		"open-write": {1, func(a []string) (string, error) {
			return "", closeAfter(unix.Open(a[0], unix.O_WRONLY|unix.O_CLOEXEC, 0))
		}},
		"open-trunc": {1, func(a []string) (string, error) {
			return "", closeAfter(unix.Open(a[0], unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0))
		}},
		"create": {1, func(a []string) (string, error) {
			return "", closeAfter(unix.Open(a[0], unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644))
		}},
		"readdir":  {1, func(a []string) (string, error) { return "", readDir(a[0]) }},
		"truncate": {1, func(a []string) (string, error) { return "", unix.Truncate(a[0], 0) }},
		"unlink":   {1, func(a []string) (string, error) { return "", unix.Unlink(a[0]) }},
		"mkdir":    {1, func(a []string) (string, error) { return "", unix.Mkdir(a[0], 0o755) }},
		"rmdir":    {1, func(a []string) (string, error) { return "", unix.Rmdir(a[0]) }},
		"rename":   {2, func(a []string) (string, error) { return "", unix.Rename(a[0], a[1]) }},
		"link":     {2, func(a []string) (string, error) { return "", unix.Link(a[0], a[1]) }},
		"mkfifo":   {1, func(a []string) (string, error) { return "", unix.Mkfifo(a[0], 0o600) }},
		// The numbers of /dev/mem: a device node made inside the sandbox
		// would reach what the device rules keep out.
		"mknod-char": {1, func(a []string) (string, error) {
			return "", unix.Mknod(a[0], unix.S_IFCHR|0o600, int(unix.Mkdev(1, 1)))
		}},
		// symlink-read TARGET LINK makes LINK point at TARGET and reads
		// through it.
		"symlink-read": {2, func(a []string) (string, error) {
			if err := unix.Symlink(a[0], a[1]); err != nil {
				return "", err
			}
			return "", openRead(a[1])
		}},
		"symlink-write": {2, func(a []string) (string, error) {
			if err := unix.Symlink(a[0], a[1]); err != nil {
				return "", err
			}
			return "", closeAfter(unix.Open(a[1], unix.O_WRONLY|unix.O_CLOEXEC, 0))
		}},
		// opath-reopen PATH opens PATH with O_PATH, which Landlock does not
		// check, and reopens it for reading through /proc/self/fd.
		"opath-reopen": {1, func(a []string) (string, error) {
			fd, err := unix.Open(a[0], unix.O_PATH|unix.O_CLOEXEC, 0)
			if err != nil {
				return "", err
			}
			return "", openRead("/proc/self/fd/" + strconv.Itoa(fd))
		}},
		// opath-openat DIR NAME opens DIR with O_PATH and NAME relative to it.
		"opath-openat": {2, func(a []string) (string, error) {
			dir, err := unix.Open(a[0], unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return "", err
			}
			return "", closeAfter(unix.Openat(dir, a[1], unix.O_RDONLY|unix.O_CLOEXEC, 0))
		}},
		"chroot": {1, func(a []string) (string, error) { return "", unix.Chroot(a[0]) }},
		// exec PATH [ARG...] runs PATH with ARG... as its arguments: the
		// line printed is PATH's when the exec succeeds.
		"exec": {-1, func(a []string) (string, error) {
			if len(a) == 0 {
				return "", usageError("exec PATH [ARG...]")
			}
			return "", syscall.Exec(a[0], a, os.Environ())
		}},
		// write-exec PATH [OP...] writes a copy of the probe to PATH and runs
		// it with OP....
		"write-exec": {-1, func(a []string) (string, error) {
			if len(a) < 2 {
				return "", usageError("write-exec PATH OP [ARG...]")
			}
			if err := copySelf(a[0]); err != nil {
				return "", err
			}
			return "", syscall.Exec(a[0], a, os.Environ())
		}},
		// memfd-exec OP [ARG...] writes a copy of the probe to a memfd, a
		// file on no path, and runs it with OP....
		"memfd-exec": {-1, func(a []string) (string, error) {
			if len(a) < 1 {
				return "", usageError("memfd-exec OP [ARG...]")
			}
			fd, err := unix.MemfdCreate("probe", unix.MFD_CLOEXEC)
			if err != nil {
				return "", err
			}
			if err := copySelfTo(os.NewFile(uintptr(fd), "memfd")); err != nil {
				return "", err
			}
			argv := append([]string{"probe"}, a...)
			return "", execveat(fd, argv, os.Environ())
		}},
		// getenv NAME prints "ok" when NAME is set, "unset" when not.
		"getenv": {1, func(a []string) (string, error) {
			if _, ok := os.LookupEnv(a[0]); !ok {
				return "unset", nil
			}
			return "", nil
		}},
		// fds prints "ok" when only descriptors 0, 1 and 2 are open, else the
		// others.
		"fds": {0, func([]string) (string, error) { return openFDs() }},
		"read-fd": {1, func(a []string) (string, error) {
			fd, err := atoi(a[0])
			if err != nil {
				return "", err
			}
			_, err = unix.Read(fd, make([]byte, 1))
			return "", err
		}},
	})
}

func closeAfter(fd int, err error) error {
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// openRead opens path for reading and reads a byte: some files (in /proc)
// check on read, not on open.
func openRead(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if _, err := unix.Read(fd, make([]byte, 1)); err != nil && err != unix.EISDIR {
		return err
	}
	return nil
}

func readDir(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, err = unix.Getdents(fd, make([]byte, 4096))
	return err
}

func copySelf(path string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o755)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	return copySelfTo(f)
}

func copySelfTo(dst *os.File) error {
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return unwrap(err)
	}
	defer src.Close()
	_, err = io.Copy(dst, src)
	return unwrap(err)
}

// unwrap is the errno inside an os error, so that it prints as one.
func unwrap(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	if le, ok := err.(*os.LinkError); ok {
		return le.Err
	}
	if se, ok := err.(*os.SyscallError); ok {
		return se.Err
	}
	return err
}

func execveat(fd int, argv, env []string) error {
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return err
	}
	envp, err := syscall.SlicePtrFromStrings(env)
	if err != nil {
		return err
	}
	empty, _ := syscall.BytePtrFromString("")
	_, _, e := unix.Syscall6(unix.SYS_EXECVEAT, uintptr(fd), uintptr(unsafe.Pointer(empty)),
		uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])), unix.AT_EMPTY_PATH, 0)
	return errnoOf(e)
}

func openFDs() (string, error) {
	dir, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(dir)
	buf := make([]byte, 8192)
	var extra []string
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
			fd, err := strconv.Atoi(name)
			if err != nil || fd <= 2 || fd == dir {
				continue
			}
			target, _ := os.Readlink("/proc/self/fd/" + name)
			extra = append(extra, fmt.Sprintf("%d=%s", fd, target))
		}
	}
	if len(extra) > 0 {
		return fmt.Sprintf("fds %v", extra), nil
	}
	return "", nil
}
