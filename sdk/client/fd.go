package client

import (
	"fmt"
	"net"
	"os"
	"strconv"
)

// EnvIPCFD names the environment variable that tells a sandboxed skill the
// descriptor of its connection to the kernel. A sandbox cannot reach the
// kernel's socket; a skill whose manifest grants [ipc] scopes gets a
// connected descriptor instead, on which only those scopes are served.
const EnvIPCFD = "KAIRO_IPC_FD"

// DialFD is a client on the inherited connection fd (see [EnvIPCFD]).
func DialFD(fd int) (*Client, error) {
	f := os.NewFile(uintptr(fd), "kairo-ipc")
	if f == nil {
		return nil, fmt.Errorf("%s=%d is not a descriptor", EnvIPCFD, fd)
	}
	defer f.Close() // FileConn holds a duplicate
	conn, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("%s=%d is not a connection to the kernel: %w", EnvIPCFD, fd, err)
	}
	return newClient(conn), nil
}

// DialEnv is [DialFD] on the descriptor [EnvIPCFD] names; ok is false when the
// variable is not set.
func DialEnv() (c *Client, ok bool, err error) {
	v := os.Getenv(EnvIPCFD)
	if v == "" {
		return nil, false, nil
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 0 {
		return nil, true, fmt.Errorf("%s=%q is not a descriptor number", EnvIPCFD, v)
	}
	c, err = DialFD(fd)
	return c, true, err
}
