package agent

import (
	"bytes"
	"context"
	"os"
	"sync"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
)

// keepLines is how many of a process's last output lines its note carries.
const keepLines = 8

// session is the agent as a caller of the kernel: it owns the processes the
// agent spawns and receives their output, of which it keeps only the last
// lines of each — output reaches memory as a milestone, never whole.
type session struct {
	ctx    context.Context
	caller kernel.Caller

	mu    sync.Mutex
	lines map[string][]string // by processId, the last keepLines
	part  map[string][]byte   // a line not yet ended
}

func newSession(ctx context.Context, r *Runtime) *session {
	return &session{
		ctx: ctx,
		caller: kernel.Caller{
			Kind: kernel.KindAgent, Name: r.cfg.Agent, Spawn: r.cfg.Spawn,
			UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), PID: int32(os.Getpid()),
		},
		lines: map[string][]string{}, part: map[string][]byte{},
	}
}

func (s *session) Caller() kernel.Caller                { return s.caller }
func (s *session) Context() context.Context             { return s.ctx }
func (s *session) PushEvents(uint64, []abi.Event) error { return nil }
func (s *session) EndStream(uint64, *abi.Error) error   { return nil }
func (s *session) PushChunks(cs []abi.StreamChunk) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range cs {
		c := &cs[i]
		if c.Encoding != "utf8" {
			continue
		}
		buf := append(s.part[c.ProcessID], c.Chunk...)
		for {
			i := bytes.IndexByte(buf, '\n')
			if i < 0 {
				break
			}
			s.addLine(c.ProcessID, string(bytes.TrimRight(buf[:i], "\r")))
			buf = buf[i+1:]
		}
		if len(buf) > 4096 {
			buf = buf[len(buf)-4096:]
		}
		s.part[c.ProcessID] = append([]byte(nil), buf...)
	}
	return nil
}

func (s *session) addLine(pid, line string) {
	l := append(s.lines[pid], line)
	if len(l) > keepLines {
		l = l[len(l)-keepLines:]
	}
	s.lines[pid] = l
}

// lastLines returns and forgets what was kept of the process's output.
func (s *session) lastLines(pid string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lines[pid]
	if p := s.part[pid]; len(p) > 0 {
		l = append(l, string(p))
		if len(l) > keepLines {
			l = l[len(l)-keepLines:]
		}
	}
	delete(s.lines, pid)
	delete(s.part, pid)
	return l
}
