package history

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/memory"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/sqlite"
	"github.com/kairo-os/kairo/manifests"
	"github.com/vmihailenco/msgpack/v5"
)

// TestWrite reads back what Write stored, as the daemon would: every
// event in one dense log in time order, each kernel subject from the
// source the agent trusts it from, every run loop ended and in memory.
func TestWrite(t *testing.T) {
	home := t.TempDir()
	const events, loops = 30000, 1200 // two daemon starts
	t0 := time.Now()
	w := Write(t, home, events, loops)
	t.Logf("wrote %d events, %d run loops in %v", w.Events, len(w.RunLoops), time.Since(t0))
	if w.Events != events || w.LastSeq != events || len(w.RunLoops) != loops {
		t.Fatalf("wrote %d events up to seq %d, %d run loops; want %d, %d", w.Events, w.LastSeq, len(w.RunLoops), events, loops)
	}

	cfg := manifests.Default()
	store, err := sqlite.Open(cfg.StorePath(home), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	subjects := map[string]int{}
	ended := map[string]bool{}
	var last *abi.Event
	var seq uint64
	err = store.Scan(context.Background(), bus.Query{}, func(ev *abi.Event) error {
		seq++
		if ev.Seq != seq {
			t.Fatalf("event %s at seq %d, want %d", ev.Type, ev.Seq, seq)
		}
		if last != nil && (ev.Time.Before(last.Time) || ev.ID <= last.ID) {
			t.Fatalf("seq %d (%s, %s) is before seq %d (%s, %s)", ev.Seq, ev.ID, ev.Time, last.Seq, last.ID, last.Time)
		}
		c := *ev
		last = &c
		subjects[ev.Type]++
		if want := sourceOf(ev.Type); want != "" && ev.Source != want {
			t.Fatalf("seq %d %s from %q, want %q", ev.Seq, ev.Type, ev.Source, want)
		}
		switch ev.Type {
		case abi.SubjectIntentEnded:
			var d abi.IntentEnded
			if err := msgpack.Unmarshal(ev.Data, &d); err != nil || d.RunLoopID != ev.CorrelationID || d.Status != abi.StatusDone {
				t.Fatalf("seq %d: intent ended %+v (%v) in correlation %s", ev.Seq, d, err, ev.CorrelationID)
			}
			ended[d.RunLoopID] = true
		case abi.SubjectMemoryIndexed:
			var d abi.MemoryIndexed
			if err := msgpack.Unmarshal(ev.Data, &d); err != nil || !ended[d.RunLoopID] || d.Segments < 3 {
				t.Fatalf("seq %d: memory indexed %+v (%v) before its run loop ended or with too few segments", ev.Seq, d, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seq != events {
		t.Fatalf("scanned %d events, want %d", seq, events)
	}
	for s, n := range w.Subjects {
		if subjects[s] != n {
			t.Errorf("%s: %d stored, Write says %d", s, subjects[s], n)
		}
	}
	if subjects[abi.SubjectSystemStarted] != 2 || subjects[abi.SubjectIntentStarted] != loops || subjects[abi.SubjectProcessExited] != loops {
		t.Errorf("subjects %v: want 2 starts, %d run loops and processes", subjects, loops)
	}
	for _, id := range w.RunLoops {
		if !ended[id] {
			t.Fatalf("run loop %s never ended", id)
		}
	}

	mem, err := memory.Open(cfg.MemoryPath(home), memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	in, err := mem.Indexed(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range w.RunLoops {
		if legacy, ok := in[id]; !ok || legacy {
			t.Fatalf("run loop %s in memory %v, legacy %v: the daemon would index it again at start", id, ok, legacy)
		}
	}
	chunks, err := mem.Retrieve(context.Background(), "history-1199", 3)
	if err != nil || len(chunks) == 0 || !strings.Contains(chunks[0].Text, "history-1199") {
		t.Fatalf("recall of history-1199: %v, %+v", err, chunks)
	}
}

// sourceOf is the source the kernel or the agent stamps on subject, ""
// for the operator's.
func sourceOf(subject string) string {
	switch {
	case abi.SubjectIn(subject, abi.SubjectProcessAll):
		return procSource
	case abi.SubjectIn(subject, abi.SubjectAgentAll), abi.SubjectIn(subject, abi.SubjectIntentAll),
		abi.SubjectIn(subject, abi.SubjectToolAll), abi.SubjectIn(subject, abi.SubjectMemoryAll):
		return agentSource
	case subject == abi.SubjectSystemStarted:
		return kernelSource
	case abi.SubjectIn(subject, abi.SubjectPluginAll):
		return hostSource
	}
	return ""
}

// BenchmarkWrite is the helper's own speed: the history, 1,000,000
// events and 10,000 run loops, in a few seconds (a smaller one with
// KAIRO_BENCH_HISTORY_EVENTS: see BenchSize).
func BenchmarkWrite(b *testing.B) {
	events, runLoops := BenchSize(b)
	for range b.N {
		t0 := time.Now()
		Write(b, b.TempDir(), events, runLoops)
		b.ReportMetric(time.Since(t0).Seconds(), "s/history")
	}
}
