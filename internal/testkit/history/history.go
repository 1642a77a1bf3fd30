// Package history gives a test a Kairo home with a long past: a log of many
// events holding many ended run loops, written the way the kernel and the
// agent write them (subjects, sources, correlation and causation, times)
// into the stores `kairo up` opens (events.db and memory.db where the
// embedded defaults put them), fast enough for a million events.
//
// A daemon started on such a home must treat the run loops as its own: each
// is a finished task, indexed in long-term memory, with nothing left to
// catch up.
package history

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/memory"
	"github.com/kairo-os/kairo/internal/testkit"
	"github.com/kairo-os/kairo/kernel/bus/sqlite"
	"github.com/kairo-os/kairo/manifests"
	"github.com/vmihailenco/msgpack/v5"
)

// Written is what [Write] stored.
type Written struct {
	// Events is how many events the log holds, LastSeq the last one's
	// sequence number.
	Events  int
	LastSeq uint64
	// RunLoops are the ended run loops' ids, oldest first; the i-th has
	// the goal [Goal](i).
	RunLoops []string
	// Subjects counts the events of each subject.
	Subjects map[string]int
}

// Goal is the goal of the i-th run loop Write writes: a task that runs
// `echo history-i`, which printed history-i.
func Goal(i int) string { return "run " + command(i) }

func command(i int) string { return "echo history-" + strconv.Itoa(i) }

// The sources the kernel and the agent stamp on their events: the agent
// believes a kernel subject only from its own source (internal/agent's
// trusted).
const (
	agentSource  = "agent/" + agentID
	procSource   = "kernel/proc"
	kernelSource = "kernel"
	hostSource   = "host"
	agentID      = "default"
)

// startEvery is how many run loops a daemon ran before it was restarted:
// each start writes kairo.system.started and one kairo.plugin.started per
// built-in plugin, as a start of `kairo up` does.
const startEvery = 1000

var plugins = []string{"timer", "llm", "rules", "terminal"}

// batchEvents is how many events go to the store in one append: one
// transaction each.
const batchEvents = 16384

// The issue's history: a million events, a run loop per hundred of them.
const (
	IssueEvents   = 1_000_000
	IssueRunLoops = 10_000
)

// BenchSize is the history a benchmark writes: the issue's, or n events
// and a run loop per hundred of them with KAIRO_BENCH_HISTORY_EVENTS=n.
// make benchcheck gives 100,000, so that the benchmarks run their code in
// CI without the 15-40 s of writing a million events; their figures then
// are not the issue's.
func BenchSize(tb testing.TB) (events, runLoops int) {
	s := os.Getenv("KAIRO_BENCH_HISTORY_EVENTS")
	if s == "" {
		return IssueEvents, IssueRunLoops
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 100 {
		tb.Fatalf("KAIRO_BENCH_HISTORY_EVENTS=%q: give a number of events, 100 or more", s)
	}
	return n, n * IssueRunLoops / IssueEvents
}

// Write appends events events to the log of home, runLoops of them ended
// run loops that ran a process (about 14 events each) and the rest what a
// daemon under load also stores (operator publishes of app.* subjects, a
// few hundred bytes each, and daemon starts), and indexes each run loop in
// long-term memory. Times are in the past, a second apart on average, and
// end a minute ago. home must hold no store yet. It fails tb when the run
// loops alone take more than events.
//
// It writes in a process of its own (cmd historygen, built here without
// the race detector): about 15 s of CPU for a million events, which a test
// built with -race would multiply many times.
func Write(tb testing.TB, home string, events, runLoops int) Written {
	tb.Helper()
	bin, remove, err := testkit.Build("./internal/testkit/history/historygen", "historygen")
	if err != nil {
		tb.Fatalf("history: %v", err)
	}
	defer remove()
	var stderr bytes.Buffer
	cmd := exec.Command(bin, home, strconv.Itoa(events), strconv.Itoa(runLoops))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("history: %v\n%s", err, stderr.Bytes())
	}
	var w Written
	if err := json.Unmarshal(out, &w); err != nil {
		tb.Fatalf("history: historygen printed %q: %v", out, err)
	}
	return w
}

// WriteHere is Write in this process, for cmd historygen.
func WriteHere(home string, events, runLoops int) (Written, error) {
	return write(home, events, runLoops)
}

func write(home string, events, runLoops int) (Written, error) {
	cfg := manifests.Default()
	if err := os.MkdirAll(home, 0o700); err != nil {
		return Written{}, err
	}
	// A WAL as large as the history: one checkpoint, at close, costs a
	// third less than one every 64 MiB.
	store, err := sqlite.Open(cfg.StorePath(home), sqlite.Config{WALMax: 1 << 30})
	if err != nil {
		return Written{}, err
	}
	if n := store.LastSeq(); n != 0 {
		store.Close()
		return Written{}, fmt.Errorf("the store of %s already holds %d events", home, n)
	}
	mem, err := memory.Open(cfg.MemoryPath(home), memory.Config{Synchronous: "normal"})
	if err != nil {
		store.Close()
		return Written{}, err
	}
	out, err := fill(store, mem, newGen(home), events, runLoops)
	// Both closed whatever happened: neither may be closed twice.
	if cerr := mem.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close memory: %w", cerr)
	}
	if cerr := store.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close the store: %w", cerr)
	}
	return out, err
}

// fill writes the history into the open stores.
func fill(store *sqlite.Store, mem *memory.Store, g *gen, events, runLoops int) (Written, error) {
	starts := max((runLoops+startEvery-1)/startEvery, 1)
	fixed := runLoops*loopEvents + (runLoops+progressEvery-1)/progressEvery + starts*(1+len(plugins))
	if fixed > events {
		return Written{}, fmt.Errorf("%d run loops take %d events, more than the %d asked", runLoops, fixed, events)
	}
	filler := events - fixed
	g.at = time.Now().Add(-time.Minute - time.Duration(events)*time.Second)

	out := Written{Subjects: map[string]int{}}
	w := startWriters(store, mem)
	batch, loops := []*abi.Event{}, map[string][]memory.Segment{}
	flush := func() bool {
		for _, ev := range batch {
			out.Subjects[ev.Type]++
		}
		out.Events += len(batch)
		ok := w.write(batch, loops)
		batch, loops = make([]*abi.Event, 0, batchEvents+64), map[string][]memory.Segment{}
		return ok
	}
	filled := 0
	for i := 0; i < runLoops || i == 0; i++ {
		if i%startEvery == 0 {
			batch = append(batch, g.start()...)
		}
		// Spread the filler evenly: before run loop i, its share so far.
		want := filler * i / max(runLoops, 1)
		for ; filled < want; filled++ {
			batch = append(batch, g.publish(filled))
		}
		if i < runLoops {
			id, evs, segs := g.runLoop(i)
			batch = append(batch, evs...)
			loops[id] = segs
			out.RunLoops = append(out.RunLoops, id)
		}
		if len(batch) >= batchEvents && !flush() {
			break
		}
	}
	for ; filled < filler; filled++ {
		batch = append(batch, g.publish(filled))
		if len(batch) >= batchEvents && !flush() {
			break
		}
	}
	flush()
	if err := w.close(); err != nil {
		return Written{}, err
	}
	out.LastSeq = store.LastSeq()
	return out, nil
}

// writers append batches of events to the log and index their run loops
// in memory, each on a goroutine of its own, while the caller makes the
// next batch: on two cores, about the time of the appends alone.
type writers struct {
	appendQ  chan batch
	indexQ   chan map[string][]memory.Segment
	failed   atomic.Bool
	appended chan error
	indexed  chan error
}

// batch is one append, and the run loops it ends.
type batch struct {
	evs   []*abi.Event
	loops map[string][]memory.Segment
}

func startWriters(store *sqlite.Store, mem *memory.Store) *writers {
	w := &writers{appendQ: make(chan batch, 2), indexQ: make(chan map[string][]memory.Segment, 2),
		appended: make(chan error, 1), indexed: make(chan error, 1)}
	go func() { // owned by w: ends when close closes appendQ
		var err error
		for b := range w.appendQ {
			if err == nil && len(b.evs) > 0 {
				if err = store.Append(b.evs, nil, make([]bool, len(b.evs))); err != nil {
					err = fmt.Errorf("append %d events: %w", len(b.evs), err)
					w.failed.Store(true)
				}
			}
			if err == nil && len(b.loops) > 0 {
				w.indexQ <- b.loops
			}
		}
		close(w.indexQ)
		w.appended <- err
	}()
	go func() { // owned by w: ends when the appender closes indexQ
		var err error
		for loops := range w.indexQ {
			if err == nil {
				if err = mem.IndexAll(context.Background(), loops); err != nil {
					err = fmt.Errorf("index %d run loops: %w", len(loops), err)
					w.failed.Store(true)
				}
			}
		}
		w.indexed <- err
	}()
	return w
}

// write queues evs and the run loops they end; false once a write failed.
func (w *writers) write(evs []*abi.Event, loops map[string][]memory.Segment) bool {
	w.appendQ <- batch{evs, loops}
	return !w.failed.Load()
}

// close waits for what was queued, and says what failed.
func (w *writers) close() error {
	close(w.appendQ)
	return errors.Join(<-w.appended, <-w.indexed)
}

// gen makes the events, their ids, times and sequence numbers in log order.
type gen struct {
	home     string
	operator string
	at       time.Time
	seq      uint64 // of the last event made
	tick     uint64
	process  int
	payloads [][]byte
}

func newGen(home string) *gen {
	g := &gen{home: home, operator: abi.PrincipalOperator + "/" + strconv.Itoa(os.Getuid())}
	// What operators publish: a handful of shapes from 100 bytes to 1 KiB.
	for _, n := range []int{40, 120, 300, 600, 900} {
		g.payloads = append(g.payloads, mustMarshal(map[string]any{
			"host": "build-1", "unit": "ms", "ok": true,
			"note": string(make([]byte, n)),
		}))
	}
	return g
}

func mustMarshal(v any) msgpack.RawMessage {
	b, err := msgpack.Marshal(v)
	if err != nil {
		panic("history: " + err.Error())
	}
	return b
}

// event makes the next event in the log, step after the one before.
func (g *gen) event(step time.Duration, subject, source string, data any, corr, cause string) *abi.Event {
	g.at = g.at.Add(step)
	g.seq++
	raw, ok := data.(msgpack.RawMessage)
	if !ok {
		raw = mustMarshal(data)
	}
	return &abi.Event{ID: abi.NewIDAt(g.at), Type: subject, Source: source, Time: g.at, Data: raw,
		CorrelationID: corr, CausationID: cause, Seq: g.seq}
}

// publish is the i-th operator publish of the filler.
func (g *gen) publish(i int) *abi.Event {
	subjects := [...]string{"app.metrics.sample", "app.build.status", "app.deploy.log"}
	return g.event(time.Second, subjects[i%len(subjects)], g.operator, msgpack.RawMessage(g.payloads[i%len(g.payloads)]), "", "")
}

// start is what a start of `kairo up` stores before anything else.
func (g *gen) start() []*abi.Event {
	evs := []*abi.Event{g.event(time.Minute, abi.SubjectSystemStarted, kernelSource, map[string]any{"version": "dev", "pid": 4242}, "", "")}
	for _, p := range plugins {
		evs = append(evs, g.event(time.Millisecond, abi.SubjectPluginStarted, hostSource, map[string]any{"plugin": p, "version": "0.1.0"}, "", ""))
	}
	return evs
}

// loopEvents is how many events a run loop stores, and every
// progressEvery-th run loop one more: its process reported progress.
const (
	loopEvents    = 14
	progressEvery = 4
)

// runLoop is the i-th run loop as `kairo send "run echo history-i"` stores
// it: the user's message, its routing, the intent, the tool call and its
// process, the note, the answer, the end and the memory's record.
// It returns the run loop's id, its events and its segments for memory.
func (g *gen) runLoop(i int) (string, []*abi.Event, []memory.Segment) {
	text := Goal(i)
	msgID := abi.NewIDAt(g.at)
	user := g.event(time.Second, abi.SubjectUserMessage, g.operator, abi.UserMessage{Text: text, MessageID: msgID}, "", "")
	routed := g.event(time.Millisecond, abi.AgentMessageSubject(agentID), agentSource, abi.UserMessage{Text: text, MessageID: msgID, Agent: agentID}, "", user.ID)
	loop := abi.NewIDAt(g.at)
	started := g.event(90*time.Millisecond, abi.SubjectIntentStarted, agentSource,
		abi.IntentStarted{RunLoopID: loop, Agent: agentID, Goal: text, MessageID: msgID, MaxIterations: 25}, loop, routed.ID)
	g.tick++
	args := `{"command":"` + command(i) + `"}`
	action := g.event(0, abi.SubjectAgentAction, agentSource,
		abi.ActionEvent{Type: "tool_call", ActionData: abi.ActionData{Tool: "process.spawn", Args: args}, Tick: g.tick}, loop, routed.ID)
	tick := g.event(0, abi.SubjectAgentTick, agentSource,
		abi.TickRecord{Tick: g.tick, At: g.at, Hz: 10, Seq: routed.Seq, Observed: []string{routed.ID}}, "", "")
	invoke := g.event(0, abi.SubjectToolInvoke, agentSource, abi.ToolInvoke{ActionID: action.ID, Tool: "process.spawn", Args: args}, loop, action.ID)

	g.process++
	pid, argv := 10000+g.process%50000, []string{"/bin/sh", "-c", command(i)}
	cwd := g.home + "/work/" + strconv.Itoa(g.process)
	spawned := g.event(25*time.Millisecond, abi.SubjectProcessSpawned, procSource,
		abi.ProcessSpawned{ProcessID: "p" + strconv.Itoa(g.process), PID: pid, Argv: argv, Cwd: cwd}, loop, action.ID)
	info := abi.ProcessInfo{ID: "p" + strconv.Itoa(g.process), PID: pid, Argv: argv, Cwd: cwd, StartedAt: g.at,
		Status: abi.ProcessRunning, CorrelationID: loop, CausationID: action.ID}
	result := g.event(0, abi.SubjectToolResult, agentSource, abi.ToolResultEvent{ActionID: action.ID, Tool: "process.spawn",
		Status: abi.StatusDone, Result: mustMarshal(info), Duration: 25 * time.Millisecond, ProcessID: info.ID}, loop, action.ID)
	evs := []*abi.Event{user, routed, started, action, tick, invoke, spawned, result}
	if i%progressEvery == 0 {
		evs = append(evs, g.event(time.Millisecond, abi.SubjectProcessProgress, procSource,
			abi.ProcessProgress{ProcessID: info.ID, Stream: "stdout", Values: map[string]any{"step": 1, "of": 1}}, loop, action.ID))
	}
	printed := "history-" + strconv.Itoa(i)
	zero := 0
	exited := g.event(time.Millisecond, abi.SubjectProcessExited, procSource, abi.ProcessExitedEvent{ProcessID: info.ID, PID: pid,
		Status: abi.ProcessExited, DurationMs: 1, ExitCode: &zero, LastLines: []abi.OutputLine{{Stream: "stdout", Text: printed}}, Lines: 1}, loop, action.ID)
	note := g.event(0, abi.SubjectAgentNote, agentSource, abi.Note{RunLoopID: loop, ProcessID: info.ID, Argv: argv,
		Status: abi.StatusDone, ExitCode: &zero, Duration: time.Millisecond, LastLines: []string{printed}}, loop, exited.ID)
	answer := "`" + command(i) + "` finished in 0s (exit code 0). It printed:\n```\n" + printed + "\n```"
	g.tick++
	say := g.event(70*time.Millisecond, abi.SubjectAgentAction, agentSource,
		abi.ActionEvent{Type: "say", ActionData: abi.ActionData{Text: answer, Done: true}, Tick: g.tick}, loop, "")
	ended := g.event(0, abi.SubjectIntentEnded, agentSource, abi.IntentEnded{RunLoopID: loop, Status: abi.StatusDone, Summary: answer}, loop, "")
	tick2 := g.event(0, abi.SubjectAgentTick, agentSource,
		abi.TickRecord{Tick: g.tick, At: g.at, Hz: 10, Seq: exited.Seq, Observed: []string{spawned.ID, exited.ID}, MemoryChanged: true}, "", "")
	evs = append(evs, exited, note, say, ended, tick2)

	var mine []abi.Event
	for _, ev := range evs {
		if memory.LoopOf(ev) == loop { // what the agent's memory observed of it
			mine = append(mine, *ev)
		}
	}
	segs := memory.Segments(mine, memory.SegmentConfig{})
	evs = append(evs, g.event(4*time.Millisecond, abi.SubjectMemoryIndexed, agentSource, abi.MemoryIndexed{RunLoopID: loop, Segments: len(segs)}, loop, ""))
	return loop, evs, segs
}
