package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/memory"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
)

// Memory is what the agent remembers beyond the state of its run
// loops.
type Memory struct {
	// Store is the long-term memory: each run loop is indexed into it when
	// it ends, and a new run loop is given what it recalls of earlier ones.
	// Nil: none.
	Store *memory.Store
	// KeepReasoning lets the policy's thoughts into long-term memory; off,
	// only the public actions, results and summaries of a run loop reach
	// the disk (seed 000 §4.2).
	KeepReasoning bool
	// Recall is how many chunks of earlier run loops a new run loop is
	// given; default 3, negative for none.
	Recall int
	// ShortTerm sizes the short-term memory of each open run loop; its
	// Summarizer rewrites a run loop's summary when the ring overflows
	// (default extractive; LLMSummarizer with a model configured).
	ShortTerm memory.ShortTermConfig
}

// LLMSummarizer rewrites a run loop's short-term summary with a language
// model, through llm.chat's Chatter. Its requests are marked
// abi.PurposeSummary, so a replay of the policy passes them by.
type LLMSummarizer struct {
	Chat interface {
		Chat(ctx context.Context, p abi.ChatParams) (abi.ChatResult, error)
	}
}

const summaryPrompt = `You keep the running summary of one task of an assistant that runs commands on a computer.
Rewrite the summary so it also covers the new lines below. Keep the facts that matter later:
what the user asked, what ran and how it ended (exit codes, durations, files), what is still
running, decisions and open questions. Drop chatter. Plain text, no preamble, at most %d bytes.`

// Summarize folds evicted into summary.
func (s LLMSummarizer) Summarize(ctx context.Context, summary string, evicted []string, maxBytes int) (string, error) {
	var u strings.Builder
	fmt.Fprintf(&u, "Summary so far:\n%s\n\nNew lines:\n", orNothing(summary))
	for _, l := range evicted {
		u.WriteString("- " + l + "\n")
	}
	res, err := s.Chat.Chat(ctx, abi.ChatParams{Purpose: abi.PurposeSummary, MaxTokens: maxBytes/3 + 16, Messages: []abi.ChatMessage{
		{Role: abi.RoleSystem, Content: fmt.Sprintf(summaryPrompt, maxBytes)},
		{Role: abi.RoleUser, Content: u.String()},
	}})
	if err != nil {
		return "", err
	}
	text := strings.TrimSpace(res.Message.Content)
	if text == "" {
		return "", fmt.Errorf("the model answered no summary (finish reason %q)", res.FinishReason)
	}
	if len(text) > maxBytes {
		text = text[:maxBytes]
	}
	return text, nil
}

func orNothing(s string) string {
	if s == "" {
		return "(nothing yet)"
	}
	return s
}

// SubjectMemoryIndexed says a run loop is in long-term memory: a run loop
// that ended without one is indexed at the next start.
const SubjectMemoryIndexed = abi.SubjectMemoryIndexed

// SubjectMemoryForgotten says the operator made memory forget something:
// what it names is left out whenever a run loop is indexed again, at a
// start or in a rebuild of memory.db from the log.
const SubjectMemoryForgotten = abi.SubjectMemoryForgotten

// keeper is the runtime's memory: the short-term memory of the open run
// loops, fed by every event the runtime observes, and the long-term store,
// fed with each run loop as it ends. Indexing and recall run on the
// keeper's goroutine, one job at a time, never on a tick.
type keeper struct {
	r     *Runtime
	cfg   Memory
	short *memory.ShortTerm

	mu     sync.Mutex
	events map[string][]abi.Event       // of the open run loops, as observed
	recall map[string][]abi.MemoryChunk // what each open run loop recalled
	// The keeper's fold of the log, kept as the log grows and saved in
	// the agent's checkpoint: the newest ended run loops (a window, as the
	// state's), which of them the log says are indexed, and what the
	// operator made memory forget.
	ended   []string
	indexed map[string]bool // of the run loops in ended
	forgot  memory.Forgetting
	// forgetting are the forgettings memory.forget applied as it
	// recorded them, by event id, until the bus brings them back.
	forgetting map[string]struct{}

	// imu serializes indexing and forgetting: a run loop indexed while it
	// is forgotten is either indexed first or leaves it out.
	imu sync.Mutex

	jobs chan func(context.Context)
	// shortQ are the events the short-term memory has yet to take: it may
	// ask a model, so it never runs on the bus's delivery.
	shortQ    []abi.Event
	shortWake chan struct{}
}

func newKeeper(r *Runtime, cfg Memory) *keeper {
	if cfg.Recall == 0 {
		cfg.Recall = 3
	}
	return &keeper{r: r, cfg: cfg, short: memory.NewShortTerm(cfg.ShortTerm),
		events: map[string][]abi.Event{}, recall: map[string][]abi.MemoryChunk{}, indexed: map[string]bool{}, forgetting: map[string]struct{}{},
		jobs: make(chan func(context.Context), 256), shortWake: make(chan struct{}, 1)}
}

// fold folds one event of the log, at start and as the bus brings them.
func (k *keeper) fold(ev *abi.Event) {
	switch ev.Type {
	case abi.SubjectIntentEnded, SubjectMemoryIndexed, SubjectMemoryForgotten:
	default:
		return
	}
	if ev.Source != abi.PrincipalAgent+"/"+k.r.cfg.Agent {
		return // another agent's run loop, memory or forgetting
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	switch ev.Type {
	case abi.SubjectIntentEnded:
		if _, ok := k.indexed[ev.CorrelationID]; ok {
			return
		}
		k.ended = append(k.ended, ev.CorrelationID)
		k.indexed[ev.CorrelationID] = false
		for len(k.ended) > maxEndedLoops {
			delete(k.indexed, k.ended[0])
			k.ended = k.ended[1:]
		}
	case SubjectMemoryIndexed:
		var d abi.MemoryIndexed
		if msgpack.Unmarshal(ev.Data, &d) == nil {
			if _, ok := k.indexed[d.RunLoopID]; ok {
				k.indexed[d.RunLoopID] = true
			}
		}
	case SubjectMemoryForgotten:
		var d abi.MemoryForgotten
		if _, mine := k.forgetting[ev.ID]; mine {
			delete(k.forgetting, ev.ID) // applied as it was recorded
			return
		}
		if msgpack.Unmarshal(ev.Data, &d) == nil {
			k.forgot.Add(memory.Forgetting{Tasks: d.Tasks, Segments: d.Segments})
		}
	}
}

// savedMemory is the keeper's fold as the agent's checkpoint holds it.
type savedMemory struct {
	Ended   []string          `msgpack:"ended,omitempty"`
	Indexed []string          `msgpack:"indexed,omitempty"`
	Forgot  memory.Forgetting `msgpack:"forgot"`
}

func (k *keeper) save() savedMemory {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := savedMemory{Ended: append([]string(nil), k.ended...), Forgot: memory.Forgetting{
		Tasks: append([]string(nil), k.forgot.Tasks...), Segments: append([]memory.SegmentRef(nil), k.forgot.Segments...)}}
	for _, id := range k.ended {
		if k.indexed[id] {
			out.Indexed = append(out.Indexed, id)
		}
	}
	return out
}

func (k *keeper) restore(in savedMemory) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ended, k.forgot = in.Ended, in.Forgot
	k.indexed = make(map[string]bool, len(in.Ended))
	for _, id := range in.Ended {
		k.indexed[id] = false
	}
	for _, id := range in.Indexed {
		if _, ok := k.indexed[id]; ok {
			k.indexed[id] = true
		}
	}
}

// follow buffers the events of the run loops open at start from now on;
// start's catch-up adds those the log held before.
func (k *keeper) follow(open []string) {
	k.mu.Lock()
	for _, id := range open {
		k.events[id] = nil
	}
	k.mu.Unlock()
}

// start runs the keeper's goroutine, first bringing memory up to the log:
// what the operator made it forget, the short-term memory and events of
// the run loops still open, and the run loops that ended but are not in
// the store as the log has them: never indexed (the daemon stopped first,
// or memory.db was removed: a rebuild), or indexed before provenance was
// kept.
func (k *keeper) start(ctx context.Context, open []string, upTo uint64) {
	var missing []string
	k.mu.Lock()
	ended, indexed := append([]string(nil), k.ended...), maps.Clone(k.indexed)
	forgot := memory.Forgetting{Tasks: slices.Clone(k.forgot.Tasks), Segments: slices.Clone(k.forgot.Segments)}
	k.mu.Unlock()
	if k.cfg.Store != nil {
		if !forgot.Empty() {
			// Recorded, then applied: a daemon that died between the two
			// applies it now.
			if _, err := k.cfg.Store.Forget(ctx, forgot); err != nil {
				k.r.log.Warn("memory: apply what was forgotten", "err", err)
			}
		}
		var stored map[string]bool
		var err error
		if len(ended) > 0 {
			if stored, err = k.cfg.Store.Indexed(ctx, ended...); err != nil {
				k.r.log.Warn("memory: list what is indexed; trusting the log", "err", err)
			}
		}
		for _, id := range ended {
			legacy, in := stored[id]
			if indexed[id] && (err != nil || (in && !legacy)) {
				continue
			}
			missing = append(missing, id)
		}
	}
	want := map[string]bool{}
	for _, id := range append(append([]string(nil), open...), missing...) {
		want[id] = true
	}
	k.r.wg.Add(1)
	go func() { // owned by the runtime: ends with its context
		defer k.r.wg.Done()
		if len(want) > 0 {
			k.catchUp(ctx, want, upTo, missing)
		}
		// The short-term memory is fed at most once a shortEvery: what
		// comes between is one batch, so a burst of events costs a run
		// loop one summary, not one each time its ring overflows.
		var fed time.Time
		var later <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case job := <-k.jobs:
				job(ctx)
			case <-k.shortWake:
				if wait := shortEvery - time.Since(fed); wait > 0 {
					if later == nil {
						later = time.After(wait)
					}
					continue
				}
				k.feedShort(ctx)
				fed = time.Now()
			case <-later:
				later = nil
				k.feedShort(ctx)
				fed = time.Now()
			}
		}
	}()
}

// shortEvery is the least time between two feeds of the short-term memory.
const shortEvery = 250 * time.Millisecond

// feedShort hands the short-term memory what waits for it, as one batch.
func (k *keeper) feedShort(ctx context.Context) {
	k.mu.Lock()
	evs := k.shortQ
	k.shortQ = nil
	k.mu.Unlock()
	// All at once: a burst of events costs one summary per run loop.
	if err := k.short.ObserveAll(ctx, evs); err != nil && ctx.Err() == nil {
		k.r.log.Warn("memory: short-term", "err", err)
	}
}

// catchUp reads the log once for the events of the run loops in want.
func (k *keeper) catchUp(ctx context.Context, want map[string]bool, upTo uint64, missing []string) {
	byLoop := map[string][]abi.Event{}
	// From the first of them to start: what a run loop holds comes after
	// its start (a loop the state no longer knows: from the beginning).
	k.r.mu.Lock()
	from := upTo + 1
	for id := range want {
		l := k.r.st.loops[id]
		if l == nil || l.startSeq == 0 {
			from = 0
			break
		}
		from = min(from, l.startSeq)
	}
	k.r.mu.Unlock()
	err := k.r.k.Bus.Replay(ctx, bus.Query{FromSeq: from, ToSeq: upTo}, func(ev *abi.Event) error {
		id := memory.LoopOf(ev)
		if !want[id] {
			return nil
		}
		c := copyEvent(ev)
		byLoop[id] = append(byLoop[id], c)
		return nil
	})
	if err != nil {
		if ctx.Err() == nil {
			k.r.log.Warn("memory: read the log", "err", err)
		}
		return
	}
	for _, id := range missing {
		if len(byLoop[id]) > 0 { // none: the log no longer has it; keep what the store has
			k.index(ctx, id, byLoop[id])
		}
		delete(byLoop, id)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var stored []abi.Event
	for id, evs := range byLoop {
		stored = append(stored, evs...)
		k.events[id] = append(evs, k.events[id]...)
	}
	slices.SortFunc(stored, func(a, b abi.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	k.shortQ = append(stored, k.shortQ...) // before what was observed since
	select {
	case k.shortWake <- struct{}{}:
	default:
	}
}

// observe takes one event as the runtime observed it from the bus.
func (k *keeper) observe(ctx context.Context, ev *abi.Event) {
	id := memory.LoopOf(ev)
	if id == "" {
		return
	}
	k.mu.Lock()
	_, open := k.events[id]
	if ev.Type == abi.SubjectIntentStarted && ev.Source == abi.PrincipalAgent+"/"+k.r.cfg.Agent {
		open = true // one of this agent's run loops, not another's
	}
	if !open {
		k.mu.Unlock()
		return
	}
	c := copyEvent(ev)
	k.events[id] = append(k.events[id], c)
	k.shortQ = append(k.shortQ, c)
	select {
	case k.shortWake <- struct{}{}:
	default:
	}
	var evs []abi.Event
	if ev.Type == abi.SubjectIntentEnded {
		evs = k.events[id]
		delete(k.events, id)
		delete(k.recall, id)
	}
	k.mu.Unlock()

	switch {
	case k.cfg.Store == nil:
	case ev.Type == abi.SubjectIntentStarted:
		var d abi.IntentStarted
		if abi.DecodeIntentStarted(ev.Data, &d) == nil && d.Goal != "" && k.cfg.Recall > 0 {
			k.queue(func(ctx context.Context) { k.recallFor(ctx, id, d.Goal) })
		}
	case ev.Type == abi.SubjectIntentEnded:
		k.queue(func(ctx context.Context) { k.index(ctx, id, evs) })
	}
}

func (k *keeper) queue(job func(context.Context)) {
	select {
	case k.jobs <- job:
	default:
		k.r.log.Warn("memory: too much to index at once; a run loop is indexed at the next start")
	}
}

// index cuts a run loop that ended into segments, stores them but what the
// operator made memory forget, and says so on the bus.
func (k *keeper) index(ctx context.Context, id string, evs []abi.Event) {
	k.imu.Lock()
	defer k.imu.Unlock()
	segs := memory.Segments(evs, memory.SegmentConfig{KeepReasoning: k.cfg.KeepReasoning})
	k.mu.Lock()
	segs = k.forgot.Keep(id, segs)
	k.mu.Unlock()
	if err := k.cfg.Store.Index(ctx, id, segs); err != nil {
		if ctx.Err() == nil {
			k.r.log.Warn("memory: index a run loop; it is tried again at the next start", "runLoop", id, "err", err)
		}
		return
	}
	k.r.publish(&abi.Event{Type: SubjectMemoryIndexed, CorrelationID: id}, abi.MemoryIndexed{RunLoopID: id, Segments: len(segs)})
}

// recallFor retrieves what earlier run loops say about a new one's goal.
func (k *keeper) recallFor(ctx context.Context, id, goal string) {
	chunks, err := k.cfg.Store.Retrieve(ctx, goal, k.cfg.Recall+2)
	if err != nil {
		k.r.log.Warn("memory: recall", "runLoop", id, "err", err)
		return
	}
	var kept []abi.MemoryChunk
	for _, c := range chunks {
		if c.Anchor.RunLoopID == id || len(kept) == k.cfg.Recall {
			continue
		}
		kept = append(kept, c)
	}
	if len(kept) == 0 {
		return
	}
	k.mu.Lock()
	if _, open := k.events[id]; open {
		k.recall[id] = kept
	}
	k.mu.Unlock()
}

// text is the memory the policy is shown: for each open run loop, its
// short-term memory and what it recalled of earlier run loops.
func (k *keeper) text(open []*runLoop) string {
	var b strings.Builder
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, l := range open {
		// Recalled text keeps its provenance: what came from a tool, a
		// process or a server is fenced as quoted data.
		short, recalled := k.short.Context(l.id), memory.RenderRecall(k.recall[l.id], 300)
		if short == "" && recalled == "" {
			continue
		}
		fmt.Fprintf(&b, "Task %s (%q):\n%s%s", l.id, oneLine(l.goal, 120), short, recalled)
	}
	return b.String()
}

// register serves memory.retrieve, memory.search, memory.expand and
// memory.forget: once, by the default agent's keeper, for every agent's
// memory (the params' agent; the default agent's when none is named).
func (k *keeper) register() {
	if k.cfg.Store == nil || k.r.cfg.Agent != k.r.router.Default() {
		return
	}
	rt := k.r.router
	serve := func(name, summary string, h func(context.Context, *kernel.Call, *keeper) (any, error)) {
		k.r.k.Register(kernel.Method{Name: name, Summary: summary, Handler: func(ctx context.Context, c *kernel.Call) (any, error) {
			kk, err := rt.keeper(c)
			if err != nil {
				return nil, err
			}
			return h(ctx, c, kk)
		}})
	}
	serve(abi.MethodMemoryRetrieve, "the chunks of earlier run loops that best answer a query, with their anchors",
		func(ctx context.Context, c *kernel.Call, kk *keeper) (any, error) {
			var p abi.MemoryRetrieveParams
			if err := c.Decode(&p); err != nil {
				return nil, err
			}
			chunks, err := kk.cfg.Store.Retrieve(ctx, p.Query, p.K)
			if err != nil {
				return nil, abi.Errorf(abi.CodeInvalidParams, "%v", err)
			}
			return chunks, nil
		})
	serve(abi.MethodMemorySearch, "a page of the chunks that best answer a query, with the cursor of the next",
		func(ctx context.Context, c *kernel.Call, kk *keeper) (any, error) {
			var p abi.MemorySearchParams
			if err := c.Decode(&p); err != nil {
				return nil, err
			}
			page, err := kk.cfg.Store.Search(ctx, p.Query, p.Cursor, p.Limit)
			if err != nil {
				return nil, abi.Errorf(abi.CodeInvalidParams, "%v", err)
			}
			return page, nil
		})
	serve(abi.MethodMemoryExpand, "a remembered chunk with the chunks of its run loop around it",
		func(ctx context.Context, c *kernel.Call, kk *keeper) (any, error) {
			var p abi.MemoryExpandParams
			if err := c.Decode(&p); err != nil {
				return nil, err
			}
			x, err := kk.cfg.Store.Expand(ctx, p.Anchor, p.Window)
			if err != nil {
				return nil, abi.Errorf(abi.CodeInvalidParams, "%v", err)
			}
			return x, nil
		})
	serve(abi.MethodMemoryForget, "forget a remembered segment, a run loop, or every segment that holds a phrase (the operator's alone; recorded)",
		func(ctx context.Context, c *kernel.Call, kk *keeper) (any, error) { return kk.forget(ctx, c) })
}

// keeper is the memory keeper of the agent a memory method's params name
// (the default agent when none), or an error that says why there is none.
func (rt *Router) keeper(c *kernel.Call) (*keeper, error) {
	var p struct {
		Agent string `msgpack:"agent"`
	}
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	if p.Agent == "" {
		p.Agent = rt.def
	}
	if _, ok := rt.Spec(p.Agent); !ok {
		return nil, abi.Errorf(abi.CodeInvalidParams, "there is no agent %q; the agents are %s", p.Agent, rt.list())
	}
	r := rt.Runtime(p.Agent)
	if r == nil {
		return nil, abi.Errorf(abi.CodeUnavailable, "the agent %q is not running", p.Agent)
	}
	if r.mem.cfg.Store == nil {
		return nil, abi.Errorf(abi.CodeInvalidParams, "the agent %q keeps no long-term memory ([memory] enabled, and its memory setting)", p.Agent)
	}
	return r.mem, nil
}

func oneLine(s string, most int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > most {
		s = s[:most] + "…"
	}
	return s
}

// forget is memory.forget: the operator makes memory forget a segment, a
// run loop or a phrase. What that names is resolved against the store,
// recorded as kairo.memory.forgotten (durable before it applies, so a
// restart or a rebuild from the log forgets it too), then removed from the
// store and from what the open run loops recalled.
func (k *keeper) forget(ctx context.Context, c *kernel.Call) (any, error) {
	caller := c.Session.Caller()
	if caller.Kind != kernel.KindOperator {
		return nil, abi.Errorf(abi.CodePermissionDenied, "%s is the operator's alone; %s may not make memory forget", abi.MethodMemoryForget, caller)
	}
	var p abi.MemoryForgetParams
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	p.Anchor, p.Task, p.Query = strings.TrimSpace(p.Anchor), strings.TrimSpace(p.Task), strings.TrimSpace(p.Query)
	n := 0
	for _, v := range []string{p.Anchor, p.Task, p.Query} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		return nil, abi.Errorf(abi.CodeInvalidParams, "%s: give exactly one of anchor, task or query", abi.MethodMemoryForget)
	}
	store := k.cfg.Store
	k.imu.Lock()
	defer k.imu.Unlock()
	var f memory.Forgetting
	switch {
	case p.Anchor != "":
		a, err := abi.ParseMemoryAnchor(p.Anchor)
		if err != nil {
			return nil, abi.Errorf(abi.CodeInvalidParams, "%v", err)
		}
		sg, err := store.Segment(ctx, a)
		if errors.Is(err, memory.ErrNotFound) {
			return nil, abi.Errorf(abi.CodeNotFound, "%v", err)
		} else if err != nil {
			return nil, err
		}
		f.Segments = []abi.MemorySegmentRef{memory.RefOf(&sg)}
	case p.Task != "":
		k.r.mu.Lock()
		_, known := k.r.st.loops[p.Task]
		k.r.mu.Unlock()
		if !known {
			stored, err := store.Indexed(ctx, p.Task)
			if err != nil {
				return nil, err
			}
			if _, known = stored[p.Task]; !known {
				return nil, abi.Errorf(abi.CodeNotFound, "no run loop %q; `kairo runs` lists them", p.Task)
			}
		}
		f.Tasks = []string{p.Task}
	default:
		segs, err := store.Find(ctx, p.Query)
		if err != nil {
			return nil, abi.Errorf(abi.CodeInvalidParams, "%v", err)
		}
		for i := range segs {
			f.Segments = append(f.Segments, memory.RefOf(&segs[i]))
		}
		if f.Empty() {
			return abi.MemoryForgetResult{Segments: []abi.MemorySegmentRef{}}, nil
		}
	}
	d := abi.MemoryForgotten{By: caller.Source(), Anchor: p.Anchor, Task: p.Task, Query: p.Query, Tasks: f.Tasks, Segments: f.Segments}
	// No correlation: the event is about memory, not a step of the run loop.
	ev := &abi.Event{Type: SubjectMemoryForgotten}
	if !k.r.prepare(ev, d) {
		return nil, fmt.Errorf("encode %s", SubjectMemoryForgotten)
	}
	k.mu.Lock()
	k.forgetting[ev.ID] = struct{}{}
	k.mu.Unlock()
	if _, err := k.r.k.Bus.Publish(ctx, ev); err != nil {
		k.mu.Lock()
		delete(k.forgetting, ev.ID)
		k.mu.Unlock()
		return nil, fmt.Errorf("record %s: %w", SubjectMemoryForgotten, err)
	}
	k.mu.Lock()
	k.forgot.Add(f)
	for id, chunks := range k.recall {
		k.recall[id] = slices.DeleteFunc(chunks, func(c abi.MemoryChunk) bool { return forgets(&f, &c) })
	}
	k.mu.Unlock()
	removed, err := store.Forget(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("recorded, but the store kept it until the next start: %w", err)
	}
	if removed == nil {
		removed = []abi.MemorySegmentRef{}
	}
	k.r.log.Info("memory forgotten by the operator", "by", d.By, "anchor", p.Anchor, "task", p.Task, "query", p.Query, "segments", len(removed))
	return abi.MemoryForgetResult{Segments: removed, Recorded: true}, nil
}

// forgets reports whether f forgets a recalled chunk: chunks and f were
// read from the same store, so their places agree.
func forgets(f *memory.Forgetting, c *abi.MemoryChunk) bool {
	if slices.Contains(f.Tasks, c.Anchor.RunLoopID) {
		return true
	}
	for _, r := range f.Segments {
		if r.RunLoopID == c.Anchor.RunLoopID && r.IterationIndex == c.Anchor.IterationIndex && r.SegmentIndex == c.Anchor.SegmentIndex {
			return true
		}
	}
	return false
}
