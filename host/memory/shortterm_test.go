package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/kairo-os/kairo/abi"
)

func TestShortTermRing(t *testing.T) {
	st := NewShortTerm(ShortTermOptions{Lines: 6, SummaryBytes: 400})
	ctx := context.Background()
	for _, ev := range backupLoop(t).evs[:12] {
		if err := st.Observe(ctx, &ev); err != nil {
			t.Fatal(err)
		}
	}
	got := st.Context("rl-backup")
	for _, want := range []string{
		"Earlier in this run loop (summary):\ngoal: back up the billing database",
		"Recent:\n",
		"- user: compress it too",
		"- said: I will compress it when the dump ends.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("context lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "another run loop") {
		t.Errorf("another run loop's event reached this one's memory:\n%s", got)
	}
	recent := strings.Count(got[strings.Index(got, "Recent:"):], "\n- ")
	if recent > 6 {
		t.Errorf("%d recent lines, the ring holds 6", recent)
	}
	if st.Context("rl-other") == "" || st.Context("rl-unknown") != "" {
		t.Error("each run loop has its own memory; an unknown one has none")
	}
	// Ending the run loop forgets it.
	end := newChain(t)
	end.add(abi.SubjectIntentEnded, "rl-backup", "", abi.IntentEnded{RunLoopID: "rl-backup", Status: "done"})
	st.Observe(ctx, &end.evs[0])
	if c := st.Context("rl-backup"); c != "" {
		t.Errorf("an ended run loop is remembered:\n%s", c)
	}
}

func TestShortTermSummaryKeepsWhatMatters(t *testing.T) {
	st := NewShortTerm(ShortTermOptions{Lines: 4, SummaryBytes: 300})
	ctx := context.Background()
	st.Add(ctx, "rl", "goal: migrate the orders table")
	for i := range 40 {
		st.Add(ctx, "rl", fmt.Sprintf("thought: considering step %d", i))
		if i == 17 {
			st.Add(ctx, "rl", "result: run_skill failed: disk quota exceeded on db-02")
		}
	}
	got := st.Context("rl")
	summary := got[:strings.Index(got, "Recent:")]
	if !strings.Contains(summary, "goal: migrate the orders table") || !strings.Contains(summary, "disk quota exceeded") {
		t.Errorf("the summary lost the goal or the failure:\n%s", got)
	}
	if len(summary) > 300+len("Earlier in this run loop (summary):\n\n") {
		t.Errorf("summary of %d bytes, bound 300:\n%s", len(summary), summary)
	}
}

type countingSummarizer struct {
	calls int
	fail  bool
}

func (c *countingSummarizer) Summarize(_ context.Context, summary string, evicted []string, _ int) (string, error) {
	c.calls++
	if c.fail {
		return "", errors.New("model unavailable")
	}
	return fmt.Sprintf("summary %d of %d lines", c.calls, len(evicted)), nil
}

func TestShortTermSummarizer(t *testing.T) {
	sum := &countingSummarizer{}
	st := NewShortTerm(ShortTermOptions{Lines: 8, Summarizer: sum})
	ctx := context.Background()
	for i := range 40 {
		if err := st.Add(ctx, "rl", fmt.Sprintf("call: step %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// Each overflow (a 9th line) folds the 5 oldest into the summary and
	// keeps 4: lines 9, 14, ... 39.
	if sum.calls != 7 {
		t.Errorf("summarizer called %d times for 40 lines in a ring of 8, want 7", sum.calls)
	}
	if got := st.Context("rl"); !strings.Contains(got, "summary 7 of 5 lines") || !strings.Contains(got, "- call: step 39") {
		t.Errorf("context:\n%s", got)
	}
	sum.fail = true
	var err error
	for i := range 4 {
		if e := st.Add(ctx, "rl", fmt.Sprintf("result: failed step %d", i)); e != nil {
			err = e
		}
	}
	if err == nil || !strings.Contains(err.Error(), "model unavailable") || !strings.Contains(err.Error(), "extractively instead") {
		t.Errorf("a failing summarizer: %v", err)
	}
	if got := st.Context("rl"); !strings.Contains(got, "failed step") {
		t.Errorf("after the summarizer failed, the evicted lines were lost:\n%s", got)
	}
}

func TestShortTermConcurrent(t *testing.T) {
	st := NewShortTerm(ShortTermOptions{Lines: 5})
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop := fmt.Sprintf("rl-%d", w%2)
			for i := range 200 {
				st.Add(ctx, loop, fmt.Sprintf("call: worker %d step %d", w, i))
				_ = st.Context(loop)
				if i%50 == 49 {
					st.Forget(loop)
				}
			}
		}()
	}
	wg.Wait()
}
