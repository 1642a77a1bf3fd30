package agent

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// fineTimer is a timer of the kernel's, a timerfd, read through the
// runtime's poller: a goroutine asleep on it is woken to the microsecond,
// where one asleep on Go's timers may be a millisecond late (the poller
// sleeps in whole milliseconds).
type fineTimer struct {
	fd   int
	f    *os.File
	c    chan struct{} // a value each time the timer fires; may be stale
	done chan struct{} // closed when the reader has ended
}

// newFineTimer returns a timer, or nil if the kernel cannot make one.
func newFineTimer() *fineTimer {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil
	}
	t := &fineTimer{fd: fd, f: os.NewFile(uintptr(fd), "timerfd"), c: make(chan struct{}, 1), done: make(chan struct{})}
	go t.read() // owned by the timer: ends with stop
	return t
}

func (t *fineTimer) read() {
	defer close(t.done)
	var b [8]byte // how many times it fired since the last read
	for {
		if _, err := t.f.Read(b[:]); err != nil {
			return
		}
		select {
		case t.c <- struct{}{}:
		default:
		}
	}
}

// set makes the timer fire once, d from now, in place of any time set
// before.
func (t *fineTimer) set(d time.Duration) {
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(max(int64(d), 1))}
	if unix.TimerfdSettime(t.fd, 0, &spec, nil) != nil {
		// Not expected of a timer the kernel made; fire at once, and the
		// ticker yields in a loop rather than missing its tick.
		select {
		case t.c <- struct{}{}:
		default:
		}
	}
}

// stop closes the timer and waits for its reader to end.
func (t *fineTimer) stop() {
	t.f.Close()
	<-t.done
}
