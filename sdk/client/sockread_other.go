//go:build !linux

package client

import (
	"io"
	"net"
)

// socketReader is what the read loop reads conn through: conn itself
// where raw reads are not written for the system.
func socketReader(conn net.Conn) io.Reader { return conn }
