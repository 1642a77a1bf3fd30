package agent

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/checkpoint"
)

// foldLog folds e's log from seq from into st, as a start does.
func foldLog(t *testing.T, e *env, st *state, from uint64) checkpoint.Point {
	t.Helper()
	var at checkpoint.Point
	err := e.bus.Replay(context.Background(), bus.Query{FromSeq: from}, func(ev *abi.Event) error {
		st.apply(ev)
		at = checkpoint.At(ev)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// canonical is st's saved form with its sets in order, encoded: two
// states that fold the same log encode the same.
func canonical(t *testing.T, st *state) []byte {
	t.Helper()
	s := st.save()
	slices.Sort(s.Own)
	for i := range s.Loops {
		slices.Sort(s.Loops[i].Joined)
	}
	slices.SortFunc(s.Unrouted, func(a, b abi.Event) int { return int(a.Seq) - int(b.Seq) })
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A state saved in a checkpoint, loaded and folded on with the log's tail
// is the state a fold of the whole log makes — run loops open and ended
// past the window, their actions and processes, the messages routed —
// and it keeps only the window of what ended: the open run loops whatever
// their age, and the newest maxEndedLoops of the ended.
func TestCheckpointFoldsLikeTheLog(t *testing.T) {
	e := newEnv(t)
	writeHistory(t, e, "a-", 6000, 7)
	before := newState("default")
	at := foldLog(t, e, before, 0)
	path := filepath.Join(t.TempDir(), "agent.ckp")
	if err := checkpoint.Save(path, foldVersion, e.bus.Host(), at, saved{State: before.save()}); err != nil {
		t.Fatal(err)
	}
	writeHistory(t, e, "b-", 3000, 5)

	whole := newState("default")
	foldLog(t, e, whole, 0)
	var in saved
	p, err := checkpoint.Load(context.Background(), e.bus, path, foldVersion, &in)
	if err != nil || p != at {
		t.Fatalf("Load = %+v, %v; want %+v", p, err, at)
	}
	tail := restore("default", in.State)
	foldLog(t, e, tail, p.Seq+1)

	if !bytes.Equal(canonical(t, whole), canonical(t, tail)) {
		t.Fatalf("the checkpoint and its tail fold to another state than the whole log:\nwhole: %d loops, %d actions, %d open, %d evicted\ntail:  %d loops, %d actions, %d open, %d evicted",
			len(whole.loops), len(whole.actions), len(whole.open), whole.evicted, len(tail.loops), len(tail.actions), len(tail.open), tail.evicted)
	}
	// The window: every open run loop (the first is among the oldest),
	// and of the ended only the newest.
	if whole.loops["a-loop-6"] == nil || whole.loops["a-loop-6"].status != "" {
		t.Error("an old open run loop was let go")
	}
	if whole.loops["a-loop-0"] != nil {
		t.Error("the oldest ended run loop is still kept")
	}
	if len(whole.ended) != maxEndedLoops || len(whole.loops) != maxEndedLoops+len(whole.open) || whole.evicted == 0 {
		t.Errorf("%d ended kept, %d loops, %d open, %d let go; want %d ended", len(whole.ended), len(whole.loops), len(whole.open), whole.evicted, maxEndedLoops)
	}
	if len(whole.actions) > 2*(len(whole.loops)+maxFreeActions) || len(whole.procs) > len(whole.loops) || len(whole.seen) > maxSeen || len(whole.routed) > maxRouted {
		t.Errorf("the state outgrows its windows: %d actions, %d procs, %d seen, %d routed", len(whole.actions), len(whole.procs), len(whole.seen), len(whole.routed))
	}
}

// A start with a checkpoint folds only the log's tail and lists what a
// start without one lists; a damaged checkpoint is refused and the start
// folds the whole log (the control), listing the same.
func TestStartFromCheckpoint(t *testing.T) {
	e := newEnv(t)
	writeHistory(t, e, "a-", 3000, 0)
	path := filepath.Join(t.TempDir(), "checkpoints", "agent.ckp")
	start := func() *Runtime {
		t.Helper()
		r, err := New(Config{Kernel: e.kernel, Policy: noop, Logger: quiet, Checkpoint: path})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(); err != nil {
			t.Fatal(err)
		}
		return r
	}
	list := func(r *Runtime) []abi.RunSummary {
		out, err := r.runsMethod(context.Background(), callWith(t, abi.RunsParams{Limit: 1000, All: true}))
		if err != nil {
			t.Fatal(err)
		}
		runs := out.(abi.RunsResult).Runs
		// Run loops of one batch start at one time: in the order of ids.
		slices.SortFunc(runs, func(a, b abi.RunSummary) int { return strings.Compare(a.ID, b.ID) })
		return runs
	}

	first := start()
	if first.rebuilt < 3000 {
		t.Fatalf("the first start folded %d events, want the whole log", first.rebuilt)
	}
	first.Stop()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no checkpoint after a stop: %v", err)
	}
	writeHistory(t, e, "b-", 120, 0)

	second := start()
	want := list(second)
	if second.rebuilt != 120 {
		t.Errorf("the start from the checkpoint folded %d events, want the 120 after it", second.rebuilt)
	}
	second.Stop()

	raw, _ := os.ReadFile(path)
	raw[len(raw)-1] ^= 0xff
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	var refused *checkpoint.Refused
	if _, err := checkpoint.Load(context.Background(), e.bus, path, foldVersion, &saved{}); !errors.As(err, &refused) {
		t.Fatalf("the damaged checkpoint loads: %v", err)
	}
	third := start()
	if third.rebuilt < 3120 {
		t.Errorf("the start on a damaged checkpoint folded %d events, want the whole log", third.rebuilt)
	}
	if got := list(third); !slices.EqualFunc(got, want, func(a, b abi.RunSummary) bool {
		return a.ID == b.ID && a.Status == b.Status && a.Actions == b.Actions && a.Iterations == b.Iterations
	}) {
		t.Errorf("the whole fold lists %d run loops, the checkpoint's start %d, or they differ", len(got), len(want))
	}
	third.Stop()
}

// callWith is a call of a method with params p.
func callWith(t *testing.T, p any) *kernel.Call {
	t.Helper()
	raw, err := msgpack.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return &kernel.Call{Params: raw}
}

// The run loops the state let go are listed from the log, page by page,
// newest first, each once, with what became of them; one is found by the
// end of its id; a page that runs out of reading budget says where to go
// on, and going on lists the rest (the control: the same listing with
// budget to spare).
func TestRunsPastTheWindow(t *testing.T) {
	e := newEnv(t)
	loops := writeHistory(t, e, "a-", 600*12, 0)
	r, err := New(Config{Kernel: e.kernel, Policy: noop, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	if r.st.evicted != loops-maxEndedLoops {
		t.Fatalf("%d run loops let go, want %d", r.st.evicted, loops-maxEndedLoops)
	}
	page := func(p abi.RunsParams) abi.RunsResult {
		t.Helper()
		out, err := r.runsMethod(context.Background(), callWith(t, p))
		if err != nil {
			t.Fatal(err)
		}
		return out.(abi.RunsResult)
	}
	stops := 0
	all := func(limit int) []abi.RunSummary {
		var got []abi.RunSummary
		p := abi.RunsParams{Limit: limit}
		for pages := 0; ; pages++ {
			if pages > 100 {
				t.Fatal("the listing does not end")
			}
			res := page(p)
			got = append(got, res.Runs...)
			if res.Next != 0 && len(res.Runs) < limit {
				stops++
			}
			if res.Next == 0 {
				return got
			}
			if res.Next >= p.Before && p.Before != 0 {
				t.Fatalf("the cursor went from %d to %d", p.Before, res.Next)
			}
			p.Before = res.Next
		}
	}
	check := func(what string, got []abi.RunSummary) {
		t.Helper()
		seen := map[string]bool{}
		for i, s := range got {
			if seen[s.ID] {
				t.Fatalf("%s: %s listed twice", what, s.ID)
			}
			seen[s.ID] = true
			if i > 0 && s.StartSeq >= got[i-1].StartSeq {
				t.Fatalf("%s: %s (seq %d) after %s (seq %d): not newest first", what, s.ID, s.StartSeq, got[i-1].ID, got[i-1].StartSeq)
			}
			if s.Status != abi.StatusDone || s.Actions != 2 || s.Iterations != 1 || s.Goal != "run make" {
				t.Fatalf("%s: %+v; want done, 2 actions in 1 iteration (one tick)", what, s)
			}
		}
		if len(got) != loops {
			t.Fatalf("%s: %d run loops listed, want %d", what, len(got), loops)
		}
	}
	check("with budget to spare", all(70))
	if stops != 0 {
		t.Fatalf("%d pages ran out of budget to spare", stops)
	}

	if res := page(abi.RunsParams{ID: "a-loop-3", All: true}); len(res.Runs) != 1 || res.Runs[0].ID != "a-loop-3" || res.Runs[0].Status != abi.StatusDone {
		t.Fatalf("a-loop-3, let go long ago, found as %+v", res.Runs)
	}

	// A question into a task the state let go is answered from its record
	// in the log, in that task; the control: one into no task says so.
	ask := func(id string) *abi.Event {
		t.Helper()
		raw, _ := msgpack.Marshal(abi.UserMessage{Text: "how far along is it?", MessageID: "q-" + id, RunLoopID: id})
		if _, err := e.bus.Publish(context.Background(), &abi.Event{Type: abi.SubjectUserMessage, Source: "cli", Data: raw}); err != nil {
			t.Fatal(err)
		}
		routed := e.events.until(t, "the question routed", func(ev *abi.Event) bool {
			var m abi.UserMessage
			return ev.Type == abi.AgentMessageSubject("default") && msgpack.Unmarshal(ev.Data, &m) == nil && m.MessageID == "q-"+id
		})
		return e.events.until(t, "the answer", func(ev *abi.Event) bool { return ev.Type == abi.SubjectAgentAction && ev.CausationID == routed.ID })
	}
	if a := ask("a-loop-3"); a.CorrelationID != "a-loop-3" || !strings.Contains(string(a.Data), "has ended: done") {
		t.Errorf("the answer about a-loop-3 is in %q: %s", a.CorrelationID, decodeAny(a.Data))
	}
	if a := ask("no-such-loop"); a.CorrelationID != "" || !strings.Contains(string(a.Data), "There is no task") {
		t.Errorf("the answer about no task is in %q: %s", a.CorrelationID, decodeAny(a.Data))
	}
	// One read of the log at a time: a question while another reads is
	// told to ask again, and reads nothing.
	r.oldLookup <- struct{}{}
	if a := ask("a-loop-4"); a.CorrelationID != "" || !strings.Contains(string(a.Data), "ask again in a moment") {
		t.Errorf("the answer while another read runs is in %q: %s", a.CorrelationID, decodeAny(a.Data))
	}
	<-r.oldLookup

	// A chunk holds the starts of fewer run loops than a page of 500.
	runsScanBudget = runsScanChunk
	defer func() { runsScanBudget = 1 << 20 }()
	check("with a budget of one chunk", all(500))
	if stops == 0 {
		t.Fatal("no page ran out of its budget of one chunk")
	}
}
