package host

import (
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/sdk/client"
)

// Connect returns a client of the daemon's kernel that reaches it without
// its socket, as nats-server's InProcessConn does: one end of a socket
// pair the daemon serves, as the operator (this process's uid). A program
// that embeds Kairo talks to it this way; the client is the caller's to
// close, and ends when the daemon stops.
func (d *Daemon) Connect() (*client.Client, error) {
	if d.srv == nil {
		return nil, errors.New("host: connect: the daemon is not started")
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("host: connect: socket pair: %w", err)
	}
	daemonEnd := os.NewFile(uintptr(fds[0]), "kairo-in-process")
	clientEnd := os.NewFile(uintptr(fds[1]), "kairo-in-process-client")
	defer daemonEnd.Close() // the server holds its own copy
	defer clientEnd.Close() // net.FileConn holds its own copy
	me := kernel.Caller{Name: "in-process", UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), PID: int32(os.Getpid())}
	if err := d.srv.ServeFile(daemonEnd, me); err != nil {
		return nil, fmt.Errorf("host: connect: %w", err)
	}
	conn, err := net.FileConn(clientEnd)
	if err != nil {
		return nil, fmt.Errorf("host: connect: %w", err)
	}
	return client.New(conn), nil
}
