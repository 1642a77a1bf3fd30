package main

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

func init() {
	register(map[string]operation{
		// fork-many N forks N children that wait, then kills them: the
		// answer is the error of the first fork refused.
		"fork-many": {1, func(a []string) (string, error) {
			n, err := atoi(a[0])
			if err != nil {
				return "", err
			}
			return "", forkMany(n)
		}},
		// mmap BYTES maps BYTES of anonymous memory.
		"mmap": {1, func(a []string) (string, error) {
			n, err := atoi(a[0])
			if err != nil {
				return "", err
			}
			b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			if err != nil {
				return "", err
			}
			return "", unix.Munmap(b)
		}},
		// spin DURATION burns CPU on two threads for DURATION of wall time.
		"spin": {1, func(a []string) (string, error) {
			d, err := time.ParseDuration(a[0])
			if err != nil {
				return "", usageError(err.Error())
			}
			done := make(chan struct{})
			deadline := time.Now().Add(d)
			for range 2 {
				go func() {
					for time.Now().Before(deadline) {
					}
					done <- struct{}{}
				}()
			}
			<-done
			<-done
			return "", nil
		}},
		// write-bytes PATH N writes N bytes to a new file at PATH.
		"write-bytes": {2, func(a []string) (string, error) {
			n, err := atoi(a[1])
			if err != nil {
				return "", err
			}
			fd, err := unix.Open(a[0], unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
			if err != nil {
				return "", err
			}
			defer unix.Close(fd)
			chunk := make([]byte, 64<<10)
			for n > 0 {
				w, err := unix.Write(fd, chunk[:min(n, len(chunk))])
				if err != nil {
					return "", err
				}
				n -= w
			}
			return "", nil
		}},
		// open-many N opens /dev/null N times.
		"open-many": {1, func(a []string) (string, error) {
			n, err := atoi(a[0])
			if err != nil {
				return "", err
			}
			for range n {
				if _, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
					return "", err
				}
			}
			return "", nil
		}},
		"sleep": {1, func(a []string) (string, error) {
			d, err := time.ParseDuration(a[0])
			if err != nil {
				return "", usageError(err.Error())
			}
			time.Sleep(d)
			return "", nil
		}},
	})
}

// forkMany forks n children that pause until killed. They run on raw calls
// only and die with the probe (parent-death signal), so a probe killed
// half-way leaves none behind.
func forkMany(n int) error {
	runtime.LockOSThread() // the parent-death signal follows this thread
	var pids []int
	defer func() {
		for _, pid := range pids {
			unix.Kill(pid, unix.SIGKILL)
			var ws unix.WaitStatus
			unix.Wait4(pid, &ws, 0, nil)
		}
	}()
	for range n {
		pid, _, e := unix.RawSyscall6(unix.SYS_CLONE, uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
		if e != 0 {
			return e
		}
		if pid == 0 {
			unix.RawSyscall(unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0)
			for { // ppoll on nothing, forever: pause, which arm64 lacks
				unix.RawSyscall6(unix.SYS_PPOLL, 0, 0, 0, 0, 0, 0)
			}
		}
		pids = append(pids, int(pid))
	}
	return nil
}
