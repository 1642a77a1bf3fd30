package egress

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// peerUID is the uid that owns the other end of c, a connection accepted
// on loopback: the kernel's exact sock_diag lookup of the client's socket
// by its four-tuple (what ss(8) reads), whose owner is the user that made
// the socket. A socket another user made and handed over is that user's.
func peerUID(c *net.TCPConn) (int, error) {
	local, ok1 := c.LocalAddr().(*net.TCPAddr)
	remote, ok2 := c.RemoteAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return -1, errors.New("not a TCP connection")
	}
	// The client's socket: its own address is our remote one.
	return socketUID(remote.AddrPort(), local.AddrPort())
}

const (
	sizeofNlMsghdr   = 16
	sizeofDiagReq    = 56 // struct inet_diag_req_v2
	offsetDiagUID    = 64 // idiag_uid in struct inet_diag_msg
	sizeofDiagMsg    = 72
	tcpListen        = 10 // TCP_LISTEN
	inetDiagNoCookie = ^uint32(0)
)

// socketUID looks up the TCP socket whose own address is src and whose
// peer is dst, and returns its owner's uid.
func socketUID(src, dst netip.AddrPort) (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return -1, fmt.Errorf("sock_diag socket: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(int64(time.Second))
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)

	family := uint8(unix.AF_INET)
	if !src.Addr().Unmap().Is4() {
		family = unix.AF_INET6
	}
	req := make([]byte, sizeofNlMsghdr+sizeofDiagReq)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(req[8:], 1) // sequence
	r := req[sizeofNlMsghdr:]
	r[0], r[1] = family, unix.IPPROTO_TCP
	ne.PutUint32(r[4:], ^uint32(0)) // every state
	id := r[8:]
	binary.BigEndian.PutUint16(id[0:], src.Port())
	binary.BigEndian.PutUint16(id[2:], dst.Port())
	putAddr(id[4:20], src, family)
	putAddr(id[20:36], dst, family)
	ne.PutUint32(id[40:], inetDiagNoCookie)
	ne.PutUint32(id[44:], inetDiagNoCookie)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return -1, fmt.Errorf("sock_diag request: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return -1, fmt.Errorf("sock_diag answer: %w", err)
	}
	buf = buf[:n]
	if n < sizeofNlMsghdr {
		return -1, errors.New("sock_diag answer too short")
	}
	switch ne.Uint16(buf[4:]) {
	case unix.NLMSG_ERROR:
		if n >= sizeofNlMsghdr+4 {
			if e := int32(ne.Uint32(buf[sizeofNlMsghdr:])); e < 0 {
				return -1, fmt.Errorf("sock_diag lookup of %v→%v: %w", src, dst, unix.Errno(-e))
			}
		}
		return -1, errors.New("sock_diag answered with an error")
	case unix.SOCK_DIAG_BY_FAMILY:
	default:
		return -1, fmt.Errorf("sock_diag answered with message type %d", ne.Uint16(buf[4:]))
	}
	m := buf[sizeofNlMsghdr:]
	if len(m) < sizeofDiagMsg {
		return -1, errors.New("sock_diag answer too short")
	}
	if m[1] == tcpListen {
		return -1, errors.New("sock_diag found a listening socket, not the client's")
	}
	return int(ne.Uint32(m[offsetDiagUID:])), nil
}

func putAddr(b []byte, a netip.AddrPort, family uint8) {
	if family == unix.AF_INET {
		v4 := a.Addr().Unmap().As4()
		copy(b, v4[:])
		return
	}
	v6 := a.Addr().As16()
	copy(b, v6[:])
}

// checkPeerUID tells whether the kernel can name a connection's owner:
// it connects to ln itself and looks its own socket up.
func checkPeerUID(ln *net.TCPListener) error {
	c, err := net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		return fmt.Errorf("cannot connect to its own listener: %w", err)
	}
	defer c.Close()
	ln.SetDeadline(time.Now().Add(5 * time.Second))
	defer ln.SetDeadline(time.Time{})
	s, err := ln.AcceptTCP()
	if err != nil {
		return fmt.Errorf("cannot accept its own connection: %w", err)
	}
	defer s.Close()
	uid, err := peerUID(s)
	if err != nil {
		return fmt.Errorf("the kernel does not tell whose a connection is (%v; is inet_diag available?)", err)
	}
	if uid != os.Geteuid() {
		return fmt.Errorf("the kernel names uid %d the owner of the proxy's own connection, not %d", uid, os.Geteuid())
	}
	return nil
}
