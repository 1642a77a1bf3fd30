package kernel

import (
	"fmt"
	"syscall"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/proc"
)

// ChunkSplicer is a [Session] that can take process output straight from the
// output pipe (an IPC connection: pipe to socket by splice(2)). Sessions
// without it get their output by PushChunks.
type ChunkSplicer interface {
	// SpliceChunk sends c as a STREAM_CHUNK whose output is the next n
	// bytes of the pipe from, moved without passing through the kernel's
	// memory (see proc.SpliceSink). It blocks while the caller is slow to
	// read. After an error the session's stream may be cut mid-frame, so
	// the session ends itself.
	SpliceChunk(c *abi.StreamChunk, from syscall.RawConn, n int) error
}

var _ proc.SpliceSink = (*sessionSink)(nil)

// CanSplice reports whether the session takes spliced output.
func (k *sessionSink) CanSplice() bool {
	_, ok := k.s.(ChunkSplicer)
	return ok
}

// SpliceChunk hands the chunk to the session's own SpliceChunk.
func (k *sessionSink) SpliceChunk(c *abi.StreamChunk, from syscall.RawConn, n int) error {
	if err := k.s.Context().Err(); err != nil {
		return err
	}
	sp, ok := k.s.(ChunkSplicer)
	if !ok {
		return fmt.Errorf("session of %s cannot take spliced output", k.s.Caller())
	}
	return sp.SpliceChunk(c, from, n)
}
