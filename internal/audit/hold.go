package audit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultDir is where the kairo daemons of a machine share the audit
// subsystem's state: the lock file each of them holds and the marker
// that says a kairo turned audit on.
const DefaultDir = "/run/kairo"

// The files in the shared folder.
const (
	// lockName is held with a shared flock by every Hold; the one that
	// releases it and then gets it exclusively is the last.
	lockName = "audit.lock"
	// markerName exists while audit is on because a kairo turned it on;
	// it says how it was before.
	markerName = "audit-enabled"
)

// Hold is one kairo's use of the audit subsystem. Many daemons run at once
// on one machine (a test suite starts dozens): the first that finds audit
// off turns it on, and the last to release its Hold turns it off again,
// whichever process each is. The count is kept by the kernel as flocks,
// so a daemon killed with SIGKILL drops out of it; the marker it leaves
// makes the next last one restore what the first found.
type Hold struct {
	lock *os.File // the shared flock, for the life of the Hold
	dir  string
	// State is what Acquire found and did.
	State HoldState
}

// HoldState is the audit subsystem as a Hold found and left it.
type HoldState struct {
	// Previous is how audit was before any kairo turned it on: "off",
	// "on" or "locked".
	Previous string
	// Enabled says audit is on now.
	Enabled bool
	// ByKairo says audit is on because a kairo turned it on (this one or
	// another still running or killed); the last Hold released turns it
	// off again.
	ByKairo bool
	// TurnedOn says this Hold's Acquire turned it on.
	TurnedOn bool
}

// Acquire takes a share of the audit subsystem, kept in dir (DefaultDir;
// created if missing). When turnOn is set and audit is off, it turns it on
// and leaves the marker that has the last Release turn it off. A locked
// subsystem is left as it is. It needs CAP_AUDIT_CONTROL; the caller
// Releases the Hold when it stops listening.
func Acquire(dir string, turnOn bool) (*Hold, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: open the shared lock: %w", err)
	}
	// Blocks only while a last Release restores the state.
	if err := flock(lock, unix.LOCK_SH); err != nil {
		lock.Close()
		return nil, fmt.Errorf("audit: lock %s: %w", lock.Name(), err)
	}
	h := &Hold{lock: lock, dir: dir}
	if err := h.start(turnOn); err != nil {
		lock.Close()
		return nil, err
	}
	return h, nil
}

func (h *Hold) start(turnOn bool) error {
	st, err := GetStatus()
	if err != nil {
		return err
	}
	marker := filepath.Join(h.dir, markerName)
	prev, marked := readMarker(marker)
	s := HoldState{Previous: st.EnabledString(), Enabled: st.Enabled != Off}
	if marked {
		s.Previous = prev
		s.ByKairo = s.Enabled
	}
	if st.Enabled == Off && turnOn {
		// The marker first: a Hold starting meanwhile that finds audit
		// on must also find that a kairo turned it on.
		if !marked {
			if err := writeMarker(marker, st.EnabledString()); err != nil {
				return err
			}
		}
		if err := SetEnabled(true); err != nil {
			if !marked {
				os.Remove(marker)
			}
			return err
		}
		s.Enabled, s.ByKairo, s.TurnedOn = true, true, true
	}
	h.State = s
	return nil
}

// Release gives the share up. The last Hold of the machine — the one that
// gets the lock to itself afterwards — restores the state the marker
// records and removes it; any other leaves audit as it is. Release is
// idempotent.
func (h *Hold) Release() error {
	if h == nil || h.lock == nil {
		return nil
	}
	lock := h.lock
	h.lock = nil
	defer lock.Close()
	// Converting the lock drops the shared one first, then tries for an
	// exclusive one: it fails while any other Hold runs.
	if err := flock(lock, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil
		}
		return fmt.Errorf("audit: lock %s: %w", lock.Name(), err)
	}
	return restore(h.dir)
}

// restore turns audit off when the marker says a kairo turned it on, and
// removes the marker; the caller holds the lock exclusively.
func restore(dir string) error {
	marker := filepath.Join(dir, markerName)
	prev, marked := readMarker(marker)
	if !marked {
		return nil
	}
	var err error
	if prev == "off" {
		st, gerr := GetStatus()
		switch {
		case gerr != nil:
			err = gerr
		case st.Enabled == On:
			err = SetEnabled(false)
		}
	}
	if err != nil {
		return fmt.Errorf("audit: turn audit off again: %w", err)
	}
	if rerr := os.Remove(marker); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		return fmt.Errorf("audit: %w", rerr)
	}
	return nil
}

// readMarker is the state the marker says audit was in before a kairo
// turned it on, and whether there is a marker.
func readMarker(path string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "previous="); ok {
			return v, true
		}
	}
	return "off", true // unreadable: a kairo turned it on, from off
}

// writeMarker records that a kairo turns audit on from previous. It is
// written whole or not at all (a rename), since another process may read
// it at any time.
func writeMarker(path, previous string) error {
	text := "previous=" + previous + "\npid=" + strconv.Itoa(os.Getpid()) +
		"\ntime=" + time.Now().UTC().Format(time.RFC3339) + "\n" +
		"# kairo turned the audit subsystem on to learn what the sandbox refuses;\n" +
		"# the last kairo to stop turns it off again and removes this file.\n"
	f, err := os.CreateTemp(filepath.Dir(path), markerName+".*")
	if err != nil {
		return fmt.Errorf("audit: write the marker: %w", err)
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("audit: write the marker: %w", err)
	}
	return nil
}

// flock is flock(2), retried when a signal interrupts it.
func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			return err
		}
	}
}
