package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LockHome takes an exclusive lock on home/kairo.lock, so that one daemon at
// a time owns a data folder (its store, its socket). The lock is an flock:
// the kernel drops it when the process dies however it dies, so a crash
// leaves no lock to clean up. The file holds the owner's pid, for the
// message another `kairo up` prints.
func LockHome(home string) (*os.File, error) {
	path := filepath.Join(home, "kairo.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			owner := "another process"
			if b, _ := os.ReadFile(path); len(b) > 0 {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					owner = fmt.Sprintf("pid %d", pid)
				}
			}
			return nil, fmt.Errorf("another `kairo up` is running on %s (%s holds %s).\nStop it first (SIGINT or SIGTERM), or give this one another --home", home, owner, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// Best effort: the pid only improves the message above.
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}
