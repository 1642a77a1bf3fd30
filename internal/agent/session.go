package agent

import (
	"context"
	"os"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
)

// keepLines is how many of a process's last output lines its note carries,
// of those its exit event carries ([abi.ProcessExitedEvent]).
const keepLines = 8

// session is the agent as a caller of the kernel: it owns the processes the
// agent spawns. Their output it drops: the kernel keeps each one's last
// lines for its exit event, and output reaches memory from there, as a
// milestone, never whole.
type session struct {
	ctx    context.Context
	caller kernel.Caller
}

func newSession(ctx context.Context, r *Runtime) *session {
	return &session{
		ctx: ctx,
		caller: kernel.Caller{
			Kind: kernel.KindAgent, Name: r.cfg.Agent, Spawn: r.cfg.Spawn,
			UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), PID: int32(os.Getpid()),
		},
	}
}

// bounded is s acting with the authority a: the agent answering another's
// ask. Its processes are the agent's still.
func (s *session) bounded(a *kernel.SpawnAuthority) *session {
	c := *s
	c.caller.Spawn = a
	return &c
}

func (s *session) Caller() kernel.Caller                { return s.caller }
func (s *session) Context() context.Context             { return s.ctx }
func (s *session) PushEvents(uint64, []abi.Event) error { return nil }
func (s *session) EndStream(uint64, *abi.Error) error   { return nil }
func (s *session) PushChunks([]abi.StreamChunk) error   { return nil }
