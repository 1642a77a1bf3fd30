package main

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

func init() {
	register(map[string]operation{
		"connect-tcp": {1, func(a []string) (string, error) { return "", connectInet(a[0], 0) }},
		// MPTCP is TCP to the peer but another protocol to Landlock, whose
		// port rules cover IPPROTO_TCP only.
		"connect-mptcp": {1, func(a []string) (string, error) { return "", connectInet(a[0], unix.IPPROTO_MPTCP) }},
		"bind-tcp": {1, func(a []string) (string, error) {
			sa, family, err := sockaddr(a[0])
			if err != nil {
				return "", err
			}
			fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return "", err
			}
			defer unix.Close(fd)
			return "", unix.Bind(fd, sa)
		}},
		// dns-udp ADDR asks the resolver at ADDR for an address and waits for
		// its answer.
		"dns-udp": {1, func(a []string) (string, error) { return "", dnsQuery(a[0]) }},
		// socket FAMILY TYPE PROTOCOL creates a socket, nothing more.
		"socket": {3, func(a []string) (string, error) {
			family, ok := families[a[0]]
			if !ok {
				return "", usageError(fmt.Sprintf("family %q: one of %v", a[0], families))
			}
			typ, ok := socketTypes[a[1]]
			if !ok {
				return "", usageError(fmt.Sprintf("type %q: one of %v", a[1], socketTypes))
			}
			proto, err := atoi(a[2])
			if err != nil {
				return "", err
			}
			return "", closeAfter(unix.Socket(family, typ|unix.SOCK_CLOEXEC, proto))
		}},
		"socketpair-unix": {0, func([]string) (string, error) {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return "", err
			}
			unix.Close(fds[0])
			unix.Close(fds[1])
			return "", nil
		}},
		"connect-unix": {1, func(a []string) (string, error) {
			return "", connectUnix(&unix.SockaddrUnix{Name: a[0]})
		}},
		// connect-abstract NAME connects to @NAME in the abstract namespace.
		"connect-abstract": {1, func(a []string) (string, error) {
			return "", connectUnix(&unix.SockaddrUnix{Name: "@" + a[0]})
		}},
		// listen-abstract NAME listens on @NAME and connects to itself: a
		// binary's own abstract sockets are its to use.
		"listen-abstract": {1, func(a []string) (string, error) {
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return "", err
			}
			defer unix.Close(fd)
			sa := &unix.SockaddrUnix{Name: "@" + a[0]}
			if err := unix.Bind(fd, sa); err != nil {
				return "", err
			}
			if err := unix.Listen(fd, 1); err != nil {
				return "", err
			}
			return "", connectUnix(sa)
		}},
	})
}

var families = map[string]int{
	"unix": unix.AF_UNIX, "inet": unix.AF_INET, "inet6": unix.AF_INET6,
	"packet": unix.AF_PACKET, "netlink": unix.AF_NETLINK, "vsock": unix.AF_VSOCK,
	"alg": unix.AF_ALG, "key": unix.AF_KEY, "bluetooth": unix.AF_BLUETOOTH,
	"tipc": unix.AF_TIPC, "xdp": unix.AF_XDP, "can": unix.AF_CAN,
}

var socketTypes = map[string]int{
	"stream": unix.SOCK_STREAM, "dgram": unix.SOCK_DGRAM, "raw": unix.SOCK_RAW,
	"seqpacket": unix.SOCK_SEQPACKET,
}

func sockaddr(s string) (unix.Sockaddr, int, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return nil, 0, usageError(err.Error())
	}
	if ap.Addr().Is4() {
		return &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}, unix.AF_INET, nil
	}
	return &unix.SockaddrInet6{Addr: ap.Addr().As16(), Port: int(ap.Port())}, unix.AF_INET6, nil
}

func connectInet(addr string, proto int) error {
	sa, family, err := sockaddr(addr)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Connect(fd, sa)
}

func connectUnix(sa *unix.SockaddrUnix) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Connect(fd, sa)
}

// dnsQuery sends an A query for kairo.invalid and waits for an answer with
// the same id.
func dnsQuery(addr string) error {
	sa, family, err := sockaddr(addr)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval((2 * time.Second).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return err
	}
	const id = 0x6b61
	q := binary.BigEndian.AppendUint16(nil, id)
	q = append(q, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0) // recursion desired, one question
	for _, label := range []string{"kairo", "invalid"} {
		q = append(q, byte(len(label)))
		q = append(q, label...)
	}
	q = append(q, 0, 0, 1, 0, 1) // root, type A, class IN
	if err := unix.Sendto(fd, q, 0, sa); err != nil {
		return err
	}
	buf := make([]byte, 512)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return err
	}
	if n < 2 || binary.BigEndian.Uint16(buf) != id {
		return fmt.Errorf("answer %q does not match the query", buf[:n])
	}
	return nil
}
