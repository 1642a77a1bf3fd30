package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// int80 makes the i386 system call trap through int 0x80 (int80_amd64.s).
func int80(trap uintptr) uintptr

const (
	i386Getpid = 20         // getpid in the i386 table
	x32Bit     = 0x40000000 // marks a system call of the x32 ABI
)

func init() {
	register(map[string]operation{
		// int80 calls getpid through the i386 entry, which has its own
		// table: a filter that only knows x86_64 numbers reads it wrong.
		"int80": {0, func([]string) (string, error) { return checkPid(int80(i386Getpid)) }},
		// x32 calls getpid with the x32 bit set.
		"x32": {0, func([]string) (string, error) {
			r, _, e := unix.RawSyscall(x32Bit|unix.SYS_GETPID, 0, 0, 0)
			if e != 0 {
				return "", e
			}
			return checkPid(r)
		}},
		"iopl": {0, func([]string) (string, error) {
			_, _, e := unix.RawSyscall(unix.SYS_IOPL, 3, 0, 0)
			return "", errnoOf(e)
		}},
	})
}

func checkPid(r uintptr) (string, error) {
	if e := unix.Errno(-int64(r)); int64(r) < 0 && int64(r) > -4096 {
		return "", e
	}
	if int(r) != os.Getpid() {
		return fmt.Sprintf("getpid answered %d, not %d", r, os.Getpid()), nil
	}
	return "", nil
}
