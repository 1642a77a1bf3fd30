package agent

import (
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus/checkpoint"
)

// foldVersion is the version of what state keeps: a change to the fold
// (a field added to runLoop or action, a window changed, an event folded
// differently) bumps it, and checkpoints of another version are refused,
// so the start folds the whole log once.
const foldVersion = 3

// saved is what a checkpoint of the agent holds: its state, the states of
// the other hosts' agents it lists, and the keeper's fold (memory.go).
type saved struct {
	State  savedState            `msgpack:"state"`
	Others map[string]savedState `msgpack:"others,omitempty"`
	Memory savedMemory           `msgpack:"memory"`
}

type savedState struct {
	Loops    []savedLoop       `msgpack:"loops"` // the open ones, then the ended ones, each oldest first
	Open     int               `msgpack:"open"`  // how many of Loops are open
	Free     []savedAction     `msgpack:"free,omitempty"`
	Seen     []string          `msgpack:"seen,omitempty"`
	Routed   []abi.Event       `msgpack:"routed,omitempty"`
	Unrouted []abi.Event       `msgpack:"unrouted,omitempty"`
	Opened   map[string]string `msgpack:"opened,omitempty"`
	Own      []string          `msgpack:"own,omitempty"`
	LastSeq  uint64            `msgpack:"lastSeq"`
	Evicted  int               `msgpack:"evicted,omitempty"`
}

type savedLoop struct {
	ID          string        `msgpack:"id"`
	Goal        string        `msgpack:"goal,omitempty"`
	StartSeq    uint64        `msgpack:"startSeq,omitempty"`
	OpenedBy    string        `msgpack:"openedBy,omitempty"`
	Started     time.Time     `msgpack:"started"`
	Ended       time.Time     `msgpack:"ended,omitempty"`
	Status      string        `msgpack:"status,omitempty"`
	Iterations  int           `msgpack:"iterations,omitempty"`
	LastTick    uint64        `msgpack:"lastTick,omitempty"`
	TickCalls   int           `msgpack:"tickCalls,omitempty"`
	MaxIter     int           `msgpack:"maxIter,omitempty"`
	Actions     []savedAction `msgpack:"actions,omitempty"`
	EndActions  int           `msgpack:"endActions,omitempty"`
	Messages    []string      `msgpack:"messages,omitempty"`
	Joined      []string      `msgpack:"joined,omitempty"`
	Queries     int           `msgpack:"queries,omitempty"`
	Interrupted bool          `msgpack:"interrupted,omitempty"`
	Ask         *abi.Ask      `msgpack:"ask,omitempty"`
}

type savedAction struct {
	ID            string              `msgpack:"id"`
	Typ           string              `msgpack:"type"`
	Tool          string              `msgpack:"tool,omitempty"`
	Args          string              `msgpack:"args,omitempty"`
	Text          string              `msgpack:"text,omitempty"`
	Status        string              `msgpack:"status,omitempty"`
	ProcessID     string              `msgpack:"processId,omitempty"`
	Pid           int                 `msgpack:"pid,omitempty"`
	Spawned       time.Time           `msgpack:"spawned,omitempty"`
	Argv          []string            `msgpack:"argv,omitempty"`
	Progress      string              `msgpack:"progress,omitempty"`
	Result        string              `msgpack:"result,omitempty"`
	Started       time.Time           `msgpack:"started"`
	Ended         time.Time           `msgpack:"ended,omitempty"`
	ExitCode      *int                `msgpack:"exitCode,omitempty"`
	Approval      string              `msgpack:"approval,omitempty"`
	ApprovalState string              `msgpack:"approvalState,omitempty"`
	Rerun         string              `msgpack:"rerun,omitempty"`
	RerunState    string              `msgpack:"rerunState,omitempty"`
	ApprovalOf    string              `msgpack:"approvalOf,omitempty"`
	Invoked       bool                `msgpack:"invoked,omitempty"`
	Denials       []abi.SandboxDenied `msgpack:"denials,omitempty"`
}

// save is s as a checkpoint holds it; the caller holds the lock s is
// kept under. Everything is copied: the checkpoint is encoded after the
// lock is let go.
func (s *state) save() savedState {
	out := savedState{Open: len(s.open), LastSeq: s.lastSeq, Evicted: s.evicted, Seen: append([]string(nil), s.seenOrder...)}
	for _, l := range s.open {
		out.Loops = append(out.Loops, l.save())
	}
	for _, l := range s.ended {
		out.Loops = append(out.Loops, l.save())
	}
	for _, a := range s.free {
		out.Free = append(out.Free, a.save())
	}
	for _, id := range s.routedOrder {
		out.Routed = append(out.Routed, copyEvent(s.routed[id]))
	}
	for _, ev := range s.unrouted {
		out.Unrouted = append(out.Unrouted, copyEvent(ev))
	}
	if len(s.opened) > 0 {
		out.Opened = make(map[string]string, len(s.opened))
		for k, v := range s.opened {
			out.Opened[k] = v
		}
	}
	for id := range s.own {
		out.Own = append(out.Own, id)
	}
	return out
}

// copyEvent is ev with data of its own: a replay and the bus lend an
// event only for the call they make.
func copyEvent(ev *abi.Event) abi.Event {
	c := *ev
	c.Data = append([]byte(nil), ev.Data...)
	return c
}

func (l *runLoop) save() savedLoop {
	out := savedLoop{ID: l.id, Goal: l.goal, StartSeq: l.startSeq, OpenedBy: l.openedBy, Started: l.started, Ended: l.ended,
		Status: l.status, Iterations: l.iterations, LastTick: l.lastTick, TickCalls: l.tickCalls, MaxIter: l.maxIter,
		EndActions: l.endActions, Messages: append([]string(nil), l.messages...), Queries: l.queries, Interrupted: l.interrupted, Ask: l.ask}
	for _, a := range l.actions {
		out.Actions = append(out.Actions, a.save())
	}
	for id := range l.joined {
		out.Joined = append(out.Joined, id)
	}
	return out
}

func (a *action) save() savedAction {
	return savedAction{ID: a.id, Typ: a.typ, Tool: a.tool, Args: a.args, Text: a.text, Status: a.status, ProcessID: a.processID,
		Pid: a.pid, Spawned: a.spawned, Argv: append([]string(nil), a.argv...), Progress: a.progress, Result: a.result,
		Started: a.started, Ended: a.ended, ExitCode: a.exitCode, Approval: a.approval, ApprovalState: a.approvalState,
		Rerun: a.rerun, RerunState: a.rerunState, ApprovalOf: a.approvalOf, Invoked: a.invoked,
		Denials: append([]abi.SandboxDenied(nil), a.denials...)}
}

// restore is the state agent's checkpoint in holds.
func restore(agent string, in savedState) *state {
	s := newState(agent)
	s.lastSeq, s.evicted = in.LastSeq, in.Evicted
	for i, sl := range in.Loops {
		l := &runLoop{id: sl.ID, goal: sl.Goal, startSeq: sl.StartSeq, openedBy: sl.OpenedBy, started: sl.Started, ended: sl.Ended,
			status: sl.Status, iterations: sl.Iterations, lastTick: sl.LastTick, tickCalls: sl.TickCalls, maxIter: sl.MaxIter,
			endActions: sl.EndActions, messages: sl.Messages, queries: sl.Queries, interrupted: sl.Interrupted, ask: sl.Ask}
		if len(sl.Joined) > 0 {
			l.joined = make(map[string]bool, len(sl.Joined))
			for _, id := range sl.Joined {
				l.joined[id] = true
			}
		}
		for _, sa := range sl.Actions {
			l.actions = append(l.actions, s.restoreAction(sa, l))
		}
		s.loops[l.id] = l
		if i < in.Open {
			s.open = append(s.open, l)
		} else {
			s.ended = append(s.ended, l)
		}
	}
	for _, sa := range in.Free {
		s.free = append(s.free, s.restoreAction(sa, nil))
	}
	for _, id := range in.Seen {
		s.see(id)
	}
	for i := range in.Routed {
		s.route(&in.Routed[i])
	}
	for i := range in.Unrouted {
		ev := &in.Unrouted[i]
		var m abi.UserMessage
		if abi.DecodeUserMessage(ev.Data, &m) == nil && m.MessageID != "" {
			s.unrouted[m.MessageID] = ev
		}
	}
	for k, v := range in.Opened {
		s.opened[k] = v
	}
	for _, id := range in.Own {
		s.own[id] = struct{}{}
	}
	return s
}

func (s *state) restoreAction(sa savedAction, l *runLoop) *action {
	a := &action{id: sa.ID, typ: sa.Typ, tool: sa.Tool, args: sa.Args, text: sa.Text, loop: l, status: sa.Status, processID: sa.ProcessID,
		pid: sa.Pid, spawned: sa.Spawned, argv: sa.Argv, progress: sa.Progress, result: sa.Result, started: sa.Started, ended: sa.Ended,
		exitCode: sa.ExitCode, approval: sa.Approval, approvalState: sa.ApprovalState, rerun: sa.Rerun, rerunState: sa.RerunState,
		approvalOf: sa.ApprovalOf, invoked: sa.Invoked, denials: sa.Denials}
	s.actions[a.id] = a
	if a.processID != "" {
		s.procs[a.processID] = a
	}
	return a
}

// loadCheckpoint folds the agent's checkpoint, when there is one the log
// vouches for, into r; it returns the point it was taken at (zero: none,
// fold the whole log).
func (r *Runtime) loadCheckpoint() checkpoint.Point {
	if r.cfg.Checkpoint == "" {
		return checkpoint.Point{}
	}
	var in saved
	p, err := checkpoint.Load(r.ctx, r.k.Bus, r.cfg.Checkpoint, foldVersion, &in)
	if err != nil {
		r.log.Info("agent: folding the whole log", "why", err)
		return checkpoint.Point{}
	}
	r.st = restore(r.cfg.Agent, in.State)
	r.st.owner = r.router.owner
	for host, st := range in.Others {
		if len(r.others) < maxOtherHosts {
			r.others[host] = restore(r.cfg.Agent, st)
		}
	}
	r.mem.restore(in.Memory)
	return p
}

// saveCheckpoint writes what the agent has folded up to r.folded.
func (r *Runtime) saveCheckpoint() {
	if r.cfg.Checkpoint == "" {
		return
	}
	r.mu.Lock()
	at := r.folded
	// Not while a routed message waits for its tick to be published: the
	// state has it, and the log not yet (take).
	if at == r.saved || at.Seq == 0 || len(r.routed) > 0 {
		r.mu.Unlock()
		return
	}
	out := saved{State: r.st.save(), Memory: r.mem.save()}
	if len(r.others) > 0 {
		out.Others = make(map[string]savedState, len(r.others))
		for host, st := range r.others {
			out.Others[host] = st.save()
		}
	}
	r.mu.Unlock()
	if err := checkpoint.Save(r.cfg.Checkpoint, foldVersion, r.k.Bus.Host(), at, out); err != nil {
		r.log.Warn("agent: save the checkpoint; the next start folds more of the log", "err", err)
		return
	}
	r.mu.Lock()
	r.saved = at
	r.mu.Unlock()
}
