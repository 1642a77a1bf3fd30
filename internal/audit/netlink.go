// Package audit reads what the sandbox refused from the Linux audit
// subsystem: Landlock's access records (ABI 7 and later, with the
// domain's LOG_NEW_EXEC_ON flag the sandbox sets) and the seccomp filter's
// refusals, as Denials. It speaks NETLINK_AUDIT itself: GetStatus and
// SetEnabled ask and switch the subsystem (CAP_AUDIT_CONTROL), Open
// listens on its read-only multicast group (CAP_AUDIT_READ), and Hold
// turns it on for as long as any kairo on the machine needs it, shared
// between processes.
//
// The kernel sends the multicast group every record it makes, whether or
// not an audit daemon runs; listening changes nothing for auditd or the
// host's other audit users.
package audit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Status is the audit subsystem's state (AUDIT_GET).
type Status struct {
	// Enabled is 0 (off), 1 (on) or 2 (on and locked: nothing can change
	// the configuration until the next boot).
	Enabled uint32
	// Failure is what the kernel does when it cannot log: 0 silent,
	// 1 printk, 2 panic.
	Failure uint32
	// PID is the registered audit daemon's (auditd), 0 when none.
	PID          uint32
	RateLimit    uint32 // records per second, 0: unlimited
	BacklogLimit uint32 // records queued at most before they are lost
	Lost         uint32 // records the kernel lost since boot
	Backlog      uint32 // records queued now
}

// Audit's enabled values.
const (
	Off    = 0
	On     = 1
	Locked = 2
)

// EnabledString names s.Enabled: "off", "on" or "locked".
func (s Status) EnabledString() string {
	switch s.Enabled {
	case Off:
		return "off"
	case On:
		return "on"
	case Locked:
		return "locked"
	}
	return fmt.Sprintf("enabled=%d", s.Enabled)
}

// ErrLocked is SetEnabled's error when audit is locked (enabled = 2).
var ErrLocked = errors.New("audit: the audit configuration is locked (enabled=2) until the next boot")

// statusSize is struct audit_status up to backlog, the fields every
// kernel has; newer kernels append version and backlog wait times.
const (
	statusSize     = 8 * 4
	statusFullSize = 11 * 4
)

// GetStatus asks the kernel for the audit subsystem's state. It needs
// CAP_AUDIT_CONTROL in the initial namespaces.
func GetStatus() (Status, error) {
	var s Status
	reply, err := request(unix.AUDIT_GET, nil)
	if err != nil {
		return s, fmt.Errorf("audit: get status: %w", err)
	}
	if len(reply) < statusSize {
		return s, fmt.Errorf("audit: get status: a reply of %d bytes, short of the %d of struct audit_status", len(reply), statusSize)
	}
	u := func(i int) uint32 { return binary.NativeEndian.Uint32(reply[4*i:]) }
	s = Status{Enabled: u(1), Failure: u(2), PID: u(3), RateLimit: u(4), BacklogLimit: u(5), Lost: u(6), Backlog: u(7)}
	return s, nil
}

// SetEnabled turns the audit subsystem on or off (AUDIT_SET with
// AUDIT_STATUS_ENABLED). It never changes a locked subsystem: it returns
// ErrLocked. It needs CAP_AUDIT_CONTROL.
func SetEnabled(on bool) error {
	st, err := GetStatus()
	if err != nil {
		return err
	}
	if st.Enabled == Locked {
		return ErrLocked
	}
	var v uint32
	if on {
		v = On
	}
	req := make([]byte, statusFullSize)
	binary.NativeEndian.PutUint32(req[0:], unix.AUDIT_STATUS_ENABLED)
	binary.NativeEndian.PutUint32(req[4:], v)
	if _, err := request(unix.AUDIT_SET, req); err != nil {
		return fmt.Errorf("audit: set enabled=%d: %w", v, err)
	}
	return nil
}

// request sends one message of type typ to the kernel's audit socket and
// returns the payload of its reply: for AUDIT_GET the status, for the
// rest nil once the kernel acknowledged it. (The kernel sends a status
// from a thread of its own, so it may come after the acknowledgement: a
// GET asks for none.)
func request(typ uint16, payload []byte) ([]byte, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return nil, os.NewSyscallError("socket(NETLINK_AUDIT)", err)
	}
	defer unix.Close(fd)
	// A reply that does not come (a kernel that lost it) must not hang
	// the caller.
	tv := unix.Timeval{Sec: 2}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil, os.NewSyscallError("setsockopt(SO_RCVTIMEO)", err)
	}
	const seq = 1
	msg := make([]byte, unix.NLMSG_HDRLEN+len(payload))
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	flags := uint16(unix.NLM_F_REQUEST)
	if typ != unix.AUDIT_GET {
		flags |= unix.NLM_F_ACK
	}
	binary.NativeEndian.PutUint16(msg[6:], flags)
	binary.NativeEndian.PutUint32(msg[8:], seq)
	copy(msg[unix.NLMSG_HDRLEN:], payload)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, os.NewSyscallError("sendto", err)
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) {
				return nil, errors.New("no reply from the kernel in 2s")
			}
			return nil, os.NewSyscallError("recvfrom", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("parse the kernel's reply: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue
			}
			switch m.Header.Type {
			case unix.NLMSG_ERROR:
				if len(m.Data) < 4 {
					return nil, errors.New("a short netlink error message")
				}
				if errno := -int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
					return nil, syscall.Errno(errno)
				}
				if typ != unix.AUDIT_GET {
					return nil, nil
				}
			case unix.AUDIT_GET:
				if typ == unix.AUDIT_GET {
					return append([]byte(nil), m.Data...), nil
				}
			}
		}
	}
}
