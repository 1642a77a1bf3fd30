package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func init() {
	register(map[string]operation{
		// kill PID SIGNAL sends SIGNAL (a name, or 0) to PID.
		"kill": {2, func(a []string) (string, error) {
			pid, sig, err := pidSignal(a[0], a[1])
			if err != nil {
				return "", err
			}
			return "", unix.Kill(pid, sig)
		}},
		"kill-self": {0, func([]string) (string, error) { return "", unix.Kill(os.Getpid(), 0) }},
		"ptrace-attach": {1, func(a []string) (string, error) {
			pid, err := atoi(a[0])
			if err != nil {
				return "", err
			}
			if err := unix.PtraceAttach(pid); err != nil {
				return "", err
			}
			unix.PtraceDetach(pid)
			return "", nil
		}},
		"ptrace-traceme": {0, func([]string) (string, error) {
			_, _, e := unix.RawSyscall6(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0, 0, 0, 0)
			return "", errnoOf(e)
		}},
		// process-vm-read PID reads a word at an address that is never
		// mapped: the permission check comes first.
		"process-vm-read": {1, func(a []string) (string, error) {
			pid, err := atoi(a[0])
			if err != nil {
				return "", err
			}
			var b [8]byte
			local := []unix.Iovec{{Base: &b[0], Len: 8}}
			remote := []unix.RemoteIovec{{Base: 8, Len: 8}}
			_, err = unix.ProcessVMReadv(pid, local, remote, 0)
			return "", err
		}},
		// pidfd-getfd PID copies PID's descriptor 0 into the probe.
		"pidfd-getfd": {1, func(a []string) (string, error) {
			pid, err := atoi(a[0])
			if err != nil {
				return "", err
			}
			pidfd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				return "", err
			}
			return "", closeAfter(unix.PidfdGetfd(pidfd, 0, 0))
		}},
		"pidfd-signal": {2, func(a []string) (string, error) {
			pid, sig, err := pidSignal(a[0], a[1])
			if err != nil {
				return "", err
			}
			pidfd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				return "", err
			}
			return "", unix.PidfdSendSignal(pidfd, sig, nil, 0)
		}},
		// ids prints the real, effective and saved uids and gids and the
		// supplementary groups.
		"ids": {0, func([]string) (string, error) {
			r, e, s := unix.Getresuid()
			rg, eg, sg := unix.Getresgid()
			groups, err := unix.Getgroups()
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("uid %d/%d/%d gid %d/%d/%d groups %v", r, e, s, rg, eg, sg, groups), nil
		}},
		// setuid UID changes this thread's uid, raw: the Go wrapper would
		// change every thread, and one is enough to see the answer.
		"setuid": {1, func(a []string) (string, error) {
			uid, err := atoi(a[0])
			if err != nil {
				return "", err
			}
			_, _, e := unix.RawSyscall(unix.SYS_SETUID, uintptr(uid), 0, 0)
			return "", errnoOf(e)
		}},
		"setgroups-root": {0, func([]string) (string, error) {
			groups := []uint32{0}
			_, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 1, uintptr(unsafe.Pointer(&groups[0])), 0)
			return "", errnoOf(e)
		}},
		// caps prints the capability sets of /proc/self/status in hex.
		"caps": {0, func([]string) (string, error) { return capabilities() }},
		// capset-admin tries to make CAP_SYS_ADMIN effective.
		"capset-admin": {0, func([]string) (string, error) {
			hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
			var data [2]unix.CapUserData
			data[0].Effective = 1 << unix.CAP_SYS_ADMIN
			data[0].Permitted = 1 << unix.CAP_SYS_ADMIN
			return "", unix.Capset(&hdr, &data[0])
		}},
		// unshare NAMESPACE enters a new namespace of that kind.
		"unshare": {1, func(a []string) (string, error) {
			flag, ok := namespaces[a[0]]
			if !ok {
				return "", usageError(fmt.Sprintf("namespace %q: one of %v", a[0], namespaces))
			}
			return "", unix.Unshare(flag)
		}},
		// clone-ns NAMESPACE forks a child in a new namespace; the child
		// exits at once.
		"clone-ns": {1, func(a []string) (string, error) {
			flag, ok := namespaces[a[0]]
			if !ok {
				return "", usageError(fmt.Sprintf("namespace %q: one of %v", a[0], namespaces))
			}
			return "", forkRaw(uintptr(flag))
		}},
		// clone3-invalid calls clone3 with no arguments: EINVAL or EFAULT
		// from the kernel, never a child.
		"clone3-invalid": {0, func([]string) (string, error) {
			_, _, e := unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0)
			return "", errnoOf(e)
		}},
		// fork forks a child that exits at once, as the runtime's threads do
		// not: the plain clone the filter must let through.
		"fork": {0, func([]string) (string, error) { return "", forkRaw(0) }},
		"setns-invalid": {0, func([]string) (string, error) {
			_, _, e := unix.RawSyscall(unix.SYS_SETNS, ^uintptr(0), 0, 0)
			return "", errnoOf(e)
		}},
		// personality VALUE sets the execution domain; 0xffffffff reads it.
		"personality": {1, func(a []string) (string, error) {
			v, err := strconv.ParseUint(a[0], 0, 32)
			if err != nil {
				return "", usageError(err.Error())
			}
			_, _, e := unix.RawSyscall(unix.SYS_PERSONALITY, uintptr(v), 0, 0)
			return "", errnoOf(e)
		}},
		"mount-invalid": {0, func([]string) (string, error) {
			return "", unix.Mount("none", "/nonexistent-kairo-probe", "kairo-probe-nofs", 0, "")
		}},
		"umount-invalid": {0, func([]string) (string, error) {
			return "", unix.Unmount("/nonexistent-kairo-probe", 0)
		}},
	})
}

var namespaces = map[string]int{
	"user": unix.CLONE_NEWUSER, "net": unix.CLONE_NEWNET, "mount": unix.CLONE_NEWNS,
	"pid": unix.CLONE_NEWPID, "uts": unix.CLONE_NEWUTS, "ipc": unix.CLONE_NEWIPC,
	"cgroup": unix.CLONE_NEWCGROUP, "time": unix.CLONE_NEWTIME,
}

func pidSignal(p, s string) (int, syscall.Signal, error) {
	pid, err := atoi(p)
	if err != nil {
		return 0, 0, err
	}
	if s == "0" {
		return pid, 0, nil
	}
	sig := unix.SignalNum(s)
	if sig == 0 {
		return 0, 0, usageError(fmt.Sprintf("signal %q", s))
	}
	return pid, sig, nil
}

// forkRaw forks with clone(flags|SIGCHLD); the child exits at once with raw
// calls only, since it has one thread of a runtime that expects several.
func forkRaw(flags uintptr) error {
	pid, _, e := unix.RawSyscall6(unix.SYS_CLONE, flags|uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
	if e != 0 {
		return e
	}
	if pid == 0 {
		unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
	}
	var ws unix.WaitStatus
	_, err := unix.Wait4(int(pid), &ws, 0, nil)
	return err
}

func capabilities() (string, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return "", unwrap(err)
	}
	defer f.Close()
	sets := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || !strings.HasPrefix(k, "Cap") {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return "", err
		}
		sets[strings.ToLower(strings.TrimPrefix(k, "Cap"))] = strconv.FormatUint(n, 16)
	}
	return fmt.Sprintf("caps inh=%s prm=%s eff=%s bnd=%s amb=%s",
		sets["inh"], sets["prm"], sets["eff"], sets["bnd"], sets["amb"]), sc.Err()
}
