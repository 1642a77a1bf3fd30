package ipc

import (
	"fmt"
	"net"
	"os"

	"github.com/kairo-os/kairo/kernel"
)

// ServeFile serves the connection f (one end of a socket pair the kernel
// made) as a session of caller, whose Grants narrow what it may call. The
// server owns f's connection from here on; f itself may be closed.
func (s *Server) ServeFile(f *os.File, caller kernel.Caller) error {
	nc, err := net.FileConn(f)
	if err != nil {
		return err
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		nc.Close()
		return fmt.Errorf("serve %s: not a unix socket", f.Name())
	}
	c, err := s.newConn(uc)
	if err != nil {
		uc.Close()
		return err
	}
	c.caller = caller
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		uc.Close()
		return fmt.Errorf("serve %s: the server is closed", f.Name())
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go c.serve()
	return nil
}
