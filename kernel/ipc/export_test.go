package ipc

// RequestBytes is what large requests of every connection hold.
func (s *Server) RequestBytes() int64 { return s.frames.used.Load() }

// AcceptStalls counts the episodes of accept starved of descriptors.
func (s *Server) AcceptStalls() int64 { return s.acceptStalls.Load() }
