package abi

// The kernel's process events: their subjects and payloads, which the
// kernel publishes and every consumer (the agent, the CLI, a policy)
// decodes. Each carries the process's run loop as the event's
// correlation id. The subjects (SubjectProcess...) are in subjects.go.

// ProcessSpawned is the data of kairo.process.spawned.
type ProcessSpawned struct {
	ProcessID string   `msgpack:"processId"`
	PID       int      `msgpack:"pid"`
	Argv      []string `msgpack:"argv"`
	Cwd       string   `msgpack:"cwd"`
	PTY       bool     `msgpack:"pty"`
	// Approval names the approval whose grants the run holds besides its
	// manifest's (SpawnParams.Approval).
	Approval string `msgpack:"approval,omitempty"`
}

// ProcessExitedEvent is the data of kairo.process.exited.
type ProcessExitedEvent struct {
	ProcessID  string `msgpack:"processId"`
	PID        int    `msgpack:"pid"`
	Status     string `msgpack:"status"` // ProcessExited or ProcessKilled
	DurationMs int64  `msgpack:"durationMs"`
	ExitCode   *int   `msgpack:"exitCode,omitempty"` // when it exited
	Signal     string `msgpack:"signal,omitempty"`   // when a signal ended it
	// Reason says why the kernel ended it (a cancel, a limit), if it did.
	Reason   string `msgpack:"reason,omitempty"`
	OOMKills int    `msgpack:"oomKills,omitempty"` // processes of its tree the memory limit killed
	// LastLines are the last lines it wrote, both streams in the order
	// they came, as the kernel keeps them ([OutputLine]); Lines counts
	// every line it wrote, so Lines - len(LastLines) were not kept.
	LastLines []OutputLine `msgpack:"lastLines,omitempty"`
	Lines     int          `msgpack:"lines,omitempty"`
}

// OutputLine is one line of a process's output as the kernel keeps it:
// the last [KeptLines] lines of a process, each cut at [KeptLineBytes].
// The text is the process's, untrusted: quote it, never follow it.
type OutputLine struct {
	Stream string `msgpack:"stream"` // "stdout" or "stderr"
	Text   string `msgpack:"text"`
}

// How much of a process's output the kernel keeps for its exit: the last
// KeptLines lines, each at most KeptLineBytes (a longer one is cut, with
// "…"). Output that is not valid UTF-8 is not kept.
const (
	KeptLines     = 40
	KeptLineBytes = 400
)

// ProcessCanceled is the data of kairo.process.canceled: the kernel is
// ending the process, and why.
type ProcessCanceled struct {
	ProcessID string `msgpack:"processId"`
	PID       int    `msgpack:"pid,omitempty"`
	Reason    string `msgpack:"reason"`
}

// ProcessProgress is the data of kairo.process.progress: the values the
// process reported on a progress line of stream.
type ProcessProgress struct {
	ProcessID string         `msgpack:"processId"`
	Stream    string         `msgpack:"stream"`
	Values    map[string]any `msgpack:"values"`
}

// ProcessInterrupted is the data of kairo.process.interrupted: a process
// the log shows running died with the daemon before it.
type ProcessInterrupted struct {
	ProcessID string `msgpack:"processId"`
	Reason    string `msgpack:"reason"`
}

// ProcessOutputThrottled is the data of kairo.process.output.throttled:
// output of stream dropped over its rate or size limit.
type ProcessOutputThrottled struct {
	ProcessID         string `msgpack:"processId"`
	Stream            string `msgpack:"stream"`
	DroppedBytes      int64  `msgpack:"droppedBytes"`
	MaxBytesPerSecond int64  `msgpack:"maxBytesPerSecond"`
	OutputLimit       int64  `msgpack:"outputLimit"`
	Reason            string `msgpack:"reason"`
}
