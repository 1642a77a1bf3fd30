//go:build !linux

package egress

import (
	"errors"
	"net"
)

var errNoPeerUID = errors.New("this system does not tell the proxy whose a connection is")

func peerUID(*net.TCPConn) (int, error) { return -1, errNoPeerUID }

func checkPeerUID(*net.TCPListener) error { return errNoPeerUID }
