package agent

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
)

// The log read for run loops the state let go is bounded: a page reads
// at most runsScanBudget events back for their starts, in chunks, and as
// many forward for their ends; a page that ran out of budget says where
// to go on (RunsResult.Next).
const runsScanChunk = 4096

// runsScanBudget is a var for the tests, which spend it on a small log.
var runsScanBudget = 1 << 20

var intentStarted = abi.MustCompilePattern(abi.SubjectIntentStarted)

// runsMethod serves agent.runs: a page of the run loops of every agent (or
// of the one asked for), newest first, merged from each agent's page.
func (rt *Router) runsMethod(ctx context.Context, c *kernel.Call) (any, error) {
	var p abi.RunsParams
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	if p.Limit <= 0 {
		p.Limit = 50
	}
	p.Limit = min(p.Limit, abi.MaxRunsPage)
	if p.Agent != "" {
		if _, ok := rt.Spec(p.Agent); !ok {
			return nil, abi.Errorf(abi.CodeInvalidParams, "there is no agent %q; the agents are %s", p.Agent, rt.list())
		}
	}
	var res abi.RunsResult
	for _, id := range rt.order {
		r := rt.Runtime(id)
		if r == nil || (p.Agent != "" && p.Agent != id) {
			continue
		}
		page, err := r.runsPage(ctx, p)
		if err != nil {
			return nil, err
		}
		res.Runs = append(res.Runs, page.Runs...)
		// A page that stopped short is complete only down to its Next:
		// the merged one goes no further.
		res.Next = max(res.Next, page.Next)
	}
	newestFirst(res.Runs)
	if res.Next > 0 {
		res.Runs = slices.DeleteFunc(res.Runs, func(s abi.RunSummary) bool { return seqKey(s) < res.Next })
	}
	if len(res.Runs) > p.Limit {
		res.Runs = res.Runs[:p.Limit]
		res.Next = seqKey(res.Runs[len(res.Runs)-1])
	}
	return res, nil
}

// runsPage is a page of the agent's run loops, newest first — the ones the
// state keeps, and past its window the ended ones it let go, read from
// the log.
func (r *Runtime) runsPage(ctx context.Context, p abi.RunsParams) (abi.RunsResult, error) {
	before := p.Before
	if before == 0 {
		before = math.MaxUint64
	}
	r.mu.Lock()
	host := r.k.Bus.Host()
	out := r.runs(nil, r.st, host, p, before)
	known := map[string]bool{}
	evicted := r.st.evicted > 0
	for id := range r.st.loops {
		known[id] = true
	}
	for h, st := range r.others {
		out = r.runs(out, st, h, p, before)
		evicted = evicted || st.evicted > 0
		for id := range st.loops {
			known[id] = true
		}
	}
	r.mu.Unlock()
	newestFirst(out)
	var res abi.RunsResult
	if evicted && !p.Open {
		// Only what beats the page's last from memory can be on it.
		floor := uint64(0)
		if len(out) >= p.Limit {
			floor = seqKey(out[p.Limit-1])
		}
		old, stop, err := r.loopsFromLog(ctx, p, before, floor, known)
		if err != nil {
			return res, err
		}
		for _, l := range old {
			if s := l.summary(r.cfg.Agent, host); wants(p, s) {
				out = append(out, s)
			}
		}
		newestFirst(out)
		if stop > 0 && (len(out) < p.Limit || seqKey(out[p.Limit-1]) < stop) {
			// The read ran out of budget above the page's end: go on
			// from where it stopped.
			out = slices.DeleteFunc(out, func(s abi.RunSummary) bool { return seqKey(s) < stop })
			res.Next = stop
		}
	}
	if len(out) > p.Limit {
		out = out[:p.Limit]
		res.Next = seqKey(out[len(out)-1])
	}
	res.Runs = out
	return res, nil
}

// seqKey orders run loops: by the seq of their start, a start not yet
// stored (the runtime applies its own events first) the newest.
func seqKey(s abi.RunSummary) uint64 {
	if s.StartSeq == 0 {
		return math.MaxUint64
	}
	return s.StartSeq
}

func newestFirst(out []abi.RunSummary) {
	slices.SortFunc(out, func(a, b abi.RunSummary) int {
		if ka, kb := seqKey(a), seqKey(b); ka != kb {
			if ka > kb {
				return -1
			}
			return 1
		}
		return b.StartedAt.Compare(a.StartedAt)
	})
}

// runs appends the run loops of st, host's, that p asks for and started
// before before, to out; the caller holds r.mu.
func (r *Runtime) runs(out []abi.RunSummary, st *state, host string, p abi.RunsParams, before uint64) []abi.RunSummary {
	for _, l := range st.loops {
		s := l.summary(r.cfg.Agent, host)
		if seqKey(s) >= before || !wants(p, s) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// wants reports whether s is of the run loops p asks for: a conversation
// only with All or asked for by its id.
func wants(p abi.RunsParams, s abi.RunSummary) bool {
	switch {
	case p.ID != "" && !strings.HasSuffix(s.ID, p.ID):
		return false
	case p.Open && s.Status != "open" && s.Status != abi.StatusInterrupted:
		return false
	}
	return !s.Conversation || p.All || p.ID != ""
}

func (l *runLoop) summary(agent, host string) abi.RunSummary {
	s := abi.RunSummary{ID: l.id, Agent: agent, Host: host, Goal: l.goal, Status: l.status, StartedAt: l.started, EndedAt: l.ended,
		Iterations: l.iterations, Actions: len(l.actions), InProgress: len(l.inProgress()), Conversation: l.conversation(), StartSeq: l.startSeq, Ask: l.ask}
	switch {
	case s.Status != "":
	case l.waiting():
		s.Status = abi.StatusInterrupted
	default:
		s.Status = "open"
	}
	return s
}

// loopsFromLog reads from the log the run loops p asks for that started
// before before and after floor and are not known (kept by the state):
// back for their starts, chunk by chunk, then forward for what became of
// them, folded in a state of their own. stop, when not 0, is where the
// read ran out of budget. Each has ended (the state lets go of no open
// run loop): one whose end is past the read says "ended".
func (r *Runtime) loopsFromLog(ctx context.Context, p abi.RunsParams, before, floor uint64, known map[string]bool) (out []*runLoop, stop uint64, err error) {
	hi := min(before-1, r.k.Bus.LastSeq())
	var starts []uint64
	want := map[string]bool{}
	read := 0
	for hi > floor && len(want) < p.Limit {
		if read >= runsScanBudget {
			stop = hi + 1
			break
		}
		lo := max(floor+1, hi-min(hi, runsScanChunk)+1)
		var found []uint64
		err := r.k.Bus.Replay(ctx, bus.Query{FromSeq: lo, ToSeq: hi, Pattern: intentStarted}, func(ev *abi.Event) error {
			var d abi.IntentStarted
			if r.foreign(ev) || !trusted(ev) || abi.DecodeIntentStarted(ev.Data, &d) != nil || d.Agent != r.cfg.Agent || known[d.RunLoopID] || want[d.RunLoopID] {
				return nil
			}
			if p.ID != "" && !strings.HasSuffix(d.RunLoopID, p.ID) {
				return nil
			}
			want[d.RunLoopID] = true
			found = append(found, ev.Seq)
			return nil
		})
		if err != nil {
			return nil, 0, err
		}
		starts = append(starts, found...)
		read += int(hi - lo + 1)
		if lo <= 1 {
			break
		}
		hi = lo - 1
	}
	if len(want) == 0 {
		return nil, stop, nil
	}
	// What became of them: their events, from the first start on, until
	// each has ended or the budget is spent.
	// Each is summed up as it ends: the state's window would let the
	// first go when a page holds more.
	st := newState(r.cfg.Agent)
	from := slices.Min(starts)
	done := map[string]bool{}
	take := func(l *runLoop) {
		if l.status == "" {
			l.status = "ended"
		}
		done[l.id] = true
		out = append(out, l)
	}
	err = r.k.Bus.Replay(ctx, bus.Query{FromSeq: from, Limit: runsScanBudget}, func(ev *abi.Event) error {
		id := ev.CorrelationID
		if !want[id] || done[id] {
			return nil
		}
		st.apply(ev)
		if l := st.loops[id]; l != nil && l.status != "" {
			take(l)
			if len(done) == len(want) {
				return bus.ErrStop
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, bus.ErrStop) {
		return nil, 0, err
	}
	for id, l := range st.loops {
		if !done[id] {
			take(l)
		}
	}
	return out, stop, nil
}
