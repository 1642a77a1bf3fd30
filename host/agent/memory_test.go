package agent

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host/memory"
	"github.com/kairo-os/kairo/kernel"
)

// memoryWatch is the rule policy, keeping the memory each tick showed it.
type memoryWatch struct {
	Policy
	mu   sync.Mutex
	seen []string
}

func (w *memoryWatch) Decide(ctx context.Context, b *abi.Batch) (*abi.Reply, error) {
	w.mu.Lock()
	w.seen = append(w.seen, b.Agent.Memory)
	w.mu.Unlock()
	return w.Policy.Decide(ctx, b)
}

func (w *memoryWatch) shown(part string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.seen {
		if strings.Contains(m, part) {
			return true
		}
	}
	return false
}

// A run loop that ends is indexed into long-term memory; a new run loop on
// the same topic is shown what it did, beside its own short-term memory;
// memory.retrieve answers from it. A run loop that ended while no store
// was kept is indexed at the next start, from the log.
func TestLongTermMemory(t *testing.T) {
	e := newEnv(t)
	// First without long-term memory: the run loop ends unindexed.
	r := e.start(Config{Policy: e.rules(), Memory: &MemoryConfig{Recall: -1}})
	e.say("run echo backup-of-photos", "")
	first := e.events.until(t, "the first run's end", typed(abi.SubjectIntentEnded)).CorrelationID
	r.Stop()

	store, err := memory.Open(filepath.Join(t.TempDir(), "memory.db"), memory.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	w := &memoryWatch{Policy: e.rules()}
	r = e.start(Config{Policy: w, Memory: &MemoryConfig{Store: store}})
	idx := e.events.until(t, "the first run indexed at start", typed(SubjectMemoryIndexed))
	if d := decodeAs[MemoryIndexed](t, idx); d.RunLoopID != first || d.Segments < 2 {
		t.Fatalf("indexed %+v; want run loop %s with its segments", d, first)
	}

	e.say("run sleep 0.3 && echo backup-of-photos", "")
	second := e.events.until(t, "the second run", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectIntentStarted && ev.CorrelationID != first
	}).CorrelationID
	e.events.until(t, "the second run's end", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectIntentEnded && ev.CorrelationID == second
	})
	if !w.shown("Recalled from earlier tasks:") || !w.shown("task "+first[len(first)-8:]) {
		t.Fatalf("the second run was not shown the first; memory shown:\n%s", strings.Join(w.seen, "\n---\n"))
	}
	if !w.shown("Task "+second) || !w.shown("Recent:") {
		t.Fatalf("no short-term memory of the second run; memory shown:\n%s", strings.Join(w.seen, "\n---\n"))
	}
	e.events.until(t, "the second run indexed", func(ev *abi.Event) bool {
		return ev.Type == SubjectMemoryIndexed && ev.CorrelationID == second
	})

	raw, _ := msgpack.Marshal(RetrieveParams{Query: "photos backup", K: 5})
	out, aerr := e.kernel.Invoke(context.Background(), MethodMemoryRetrieve, &kernel.Call{Session: r.sess, Params: raw})
	if aerr != nil {
		t.Fatal(aerr)
	}
	var chunks []memory.Chunk
	if err := msgpack.Unmarshal(out, &chunks); err != nil || len(chunks) == 0 {
		t.Fatalf("memory.retrieve: %v, %d chunks", err, len(chunks))
	}
	loops := map[string]bool{}
	for _, c := range chunks {
		loops[c.Anchor.RunLoopID] = true
	}
	if !loops[first] || !loops[second] {
		t.Fatalf("memory.retrieve found run loops %v; want %s and %s", loops, first, second)
	}
}

// With a model configured, a run loop's short-term summary is the model's:
// asked, through a real HTTP server speaking OpenAI's protocol, once the
// ring overflows, with the lines that fell out; its request is marked as a
// summary's.
func TestLLMSummarizer(t *testing.T) {
	model := &openAI{answers: []map[string]any{content("The user asked for a build; make ran and exited 0.")}}
	e := newEnv(t)
	_, p := e.model(model, 0)
	st := memory.NewShortTerm(memory.ShortTermOptions{Lines: 4, Summarizer: LLMSummarizer{Chat: p}})
	for _, l := range []string{"user: build it", "tool_call process.spawn make", "process exited 0", "say: built", "user: thanks"} {
		if err := st.Add(context.Background(), "loop-1", l); err != nil {
			t.Fatal(err)
		}
	}
	ctx := st.Context("loop-1")
	if !strings.Contains(ctx, "The user asked for a build; make ran and exited 0.") || !strings.Contains(ctx, "- user: thanks") {
		t.Fatalf("short-term memory:\n%s", ctx)
	}
	if asked := model.request(0); !strings.Contains(asked, "- user: build it") || !strings.Contains(asked, "- process exited 0") {
		t.Fatalf("the model was asked:\n%s", asked)
	}
	req := e.events.until(t, "the recorded request", typed(abi.SubjectLLMRequest))
	if d := decodeAs[abi.LLMRequest](t, req); d.Params.Purpose != abi.PurposeSummary {
		t.Fatalf("the request's purpose is %q", d.Params.Purpose)
	}
}
