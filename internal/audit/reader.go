package audit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Config configure a Reader. OnDenial is required; the zero value of
// every other field picks the default.
type Config struct {
	// OnDenial is called with each refusal, on the Reader's goroutine, in
	// the order the events end. It must not block for long: records queue
	// in the socket meanwhile, and a full queue loses them (OnLost).
	OnDenial func(Denial)
	// OnLost is told of records that were lost or skipped, with how many
	// and why; nil drops the news (Lost still counts them). A count of 1
	// for a queue overflow means "some": the kernel does not say how many.
	OnLost func(n int, reason string)
	// MaxPending bounds the events whose records are still being
	// gathered; past it the oldest is read as it is. Default 256.
	MaxPending int
	// Settle is how long an event may wait for its next record before it
	// is read as it is: an event that is no system call's has no end
	// record. Default 100ms.
	Settle time.Duration
	// MaxRecord is the largest record read; a larger one is skipped and
	// counted. Default 16 KiB (the kernel's records are at most about
	// 9 KiB).
	MaxRecord int
}

// Reader listens to the audit subsystem's multicast group and reports
// refusals. Its one goroutine runs from Open to Close.
type Reader struct {
	f    *os.File
	opts Config
	done chan struct{}

	mu   sync.Mutex
	lost uint64

	asm *assembler // owned by the goroutine
}

// rcvBuf is the socket's receive buffer: room for bursts of records while
// the goroutine hands refusals over.
const rcvBuf = 4 << 20

// Open starts listening to the audit subsystem's read-only multicast group
// (AUDIT_NLGRP_READLOG), which needs CAP_AUDIT_READ. It reports nothing
// while audit is off: turn it on first (Hold). Close stops it.
func Open(opts Config) (*Reader, error) {
	if opts.OnDenial == nil {
		return nil, errors.New("audit: Options.OnDenial is nil: it is where the refusals go")
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = 256
	}
	if opts.Settle <= 0 {
		opts.Settle = 100 * time.Millisecond
	}
	if opts.MaxRecord <= 0 {
		opts.MaxRecord = 16 << 10
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_AUDIT)
	if err != nil {
		return nil, fmt.Errorf("audit: open the audit socket: %w", os.NewSyscallError("socket(NETLINK_AUDIT)", err))
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvBuf); err != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvBuf) // the system's maximum, then
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1 << (unix.AUDIT_NLGRP_READLOG - 1)}); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("audit: listen to the audit log: %w; it needs CAP_AUDIT_READ", err)
		}
		return nil, fmt.Errorf("audit: listen to the audit log: %w", os.NewSyscallError("bind(AUDIT_NLGRP_READLOG)", err))
	}
	r := &Reader{
		f: os.NewFile(uintptr(fd), "audit"), opts: opts, done: make(chan struct{}),
		asm: newAssembler(opts.MaxPending, opts.OnDenial),
	}
	go r.run()
	return r, nil
}

// Close stops the Reader's goroutine and waits for it; the events still
// gathering are read first.
func (r *Reader) Close() error {
	err := r.f.Close()
	<-r.done
	return err
}

// Lost is how many records were lost or skipped so far (OnLost's counts).
func (r *Reader) Lost() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lost
}

func (r *Reader) reportLost(n int, reason string) {
	r.mu.Lock()
	r.lost += uint64(n)
	r.mu.Unlock()
	if r.opts.OnLost != nil {
		r.opts.OnLost(n, reason)
	}
}

// run reads records until Close.
func (r *Reader) run() {
	defer close(r.done)
	defer r.asm.flush(time.Time{}) // what is still gathering, at Close
	raw, err := r.f.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, r.opts.MaxRecord)
	for {
		var deadline time.Time
		if oldest := r.asm.oldest(); !oldest.IsZero() {
			deadline = oldest.Add(r.opts.Settle)
		}
		r.f.SetReadDeadline(deadline)
		var n int
		var rerr error
		err := raw.Read(func(fd uintptr) bool {
			n, _, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_TRUNC)
			return rerr != unix.EAGAIN
		})
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			r.asm.flush(time.Now().Add(-r.opts.Settle))
			continue
		case err != nil:
			return // closed
		case errors.Is(rerr, unix.ENOBUFS):
			// The socket's queue overflowed: the kernel dropped records
			// and says only that it did.
			r.reportLost(1, "the audit socket's receive queue overflowed: records were dropped")
			continue
		case rerr != nil:
			r.reportLost(1, "reading the audit socket failed: "+rerr.Error())
			time.Sleep(10 * time.Millisecond) // no busy loop on a persistent error
			continue
		case n > len(buf):
			r.reportLost(1, fmt.Sprintf("a record of %d bytes, over the %d read", n, len(buf)))
			continue
		}
		r.take(buf[:n], time.Now())
		r.asm.flush(time.Now().Add(-r.opts.Settle))
	}
}

// take reads one netlink message holding one record and files it with its
// event.
func (r *Reader) take(msg []byte, now time.Time) {
	if len(msg) < unix.NLMSG_HDRLEN {
		return
	}
	typ := binary.NativeEndian.Uint16(msg[4:])
	if l := int(binary.NativeEndian.Uint32(msg[0:])); l >= unix.NLMSG_HDRLEN && l <= len(msg) {
		msg = msg[:l]
	}
	switch typ {
	case typeSyscall, typeEOE, typeSeccomp, typeLandlockAccess, typeLandlockDomain:
	default:
		return
	}
	if rec, ok := parseRecord(typ, string(msg[unix.NLMSG_HDRLEN:])); ok {
		r.asm.add(rec, now)
	}
}
