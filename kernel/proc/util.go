package proc

import (
	"errors"
	"sort"
	"syscall"

	"github.com/kairo-os/kairo/abi"
)

func sortByStart(ps []abi.ProcessInfo) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].StartedAt.Before(ps[j].StartedAt) })
}

// isEIO is how a PTY's master reads end once the terminal's last user is gone.
func isEIO(err error) bool { return errors.Is(err, syscall.EIO) }
