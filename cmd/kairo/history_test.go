package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/internal/testkit/history"
)

// The long history of issue 37: a daemon meant to run for months holds a
// log of millions of events and thousands of tasks.
const (
	historyEvents   = 1_000_000
	historyRunLoops = 10_000
)

// strictOverEmptyMiB is the bound on a daemon restarted on that
// history: at most this much resident memory more than one on an empty
// home. BenchmarkUpOnHistory prints the figure; TestUpOnLongHistory
// asserts twice it, a margin for a shared machine's noise that still
// fails a start that reads the log whole (hundreds of MiB).
const strictOverEmptyMiB = 16

// upFigures are what one `kairo up` cost: the time from exec to ready
// (client.WaitReady answers) and its resident memory a second after,
// idle.
type upFigures struct {
	ready time.Duration
	rss   int64
	// anon and file split rss: the process's own memory, and the pages of
	// files it maps (events.db, read through mmap).
	anon, file int64
}

// statusKiB is the field of /proc/pid/status given in kB, 0 when it
// cannot be read.
func statusKiB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb
		}
	}
	return 0
}

// upOn starts `kairo up` on home and measures it.
func upOn(tb testing.TB, home string) (*upProc, upFigures) {
	tb.Helper()
	t0 := time.Now()
	d := startUpEnv(tb, home, kairoBin, childEnv(home))
	f := upFigures{ready: time.Since(t0)}
	time.Sleep(time.Second) // what start-up left behind settles
	f.rss = rssNow(d.cmd.Process.Pid)
	f.anon, f.file = statusKiB(d.cmd.Process.Pid, "RssAnon")<<10, statusKiB(d.cmd.Process.Pid, "RssFile")<<10
	if f.rss == 0 {
		tb.Fatalf("no VmRSS for kairo up (pid %d)", d.cmd.Process.Pid)
	}
	return d, f
}

// answers checks that the daemon on home answers and runs a task, and
// returns its resident memory after the task.
func answers(t *testing.T, d *upProc) int64 {
	t.Helper()
	if r := kairo(t, d.home, "send", "help"); r.code != 0 || !strings.Contains(r.stdout, "run <command line>") {
		t.Fatalf("send help on %s:\n%s\n%s", d.home, r, tail(d.stderr.String()))
	}
	if r := kairo(t, d.home, "send", "run echo hi"); r.code != 0 || !strings.Contains(r.stdout, "`echo hi` finished in") || !strings.Contains(r.stdout, "\nhi\n") {
		t.Fatalf("send run echo hi on %s:\n%s\n%s", d.home, r, tail(d.stderr.String()))
	}
	return rssNow(d.cmd.Process.Pid)
}

// TestUpOnLongHistory is issue 37's test: `kairo up` on a log of a million
// events and ten thousand ended run loops starts, answers, runs a task and
// lists the old run loops as its own; its resident memory is measured
// against a daemon's on an empty home, in the same test.
func TestUpOnLongHistory(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("writes a million events")
	}
	empty, long := t.TempDir(), t.TempDir()
	t0 := time.Now()
	w := history.Write(t, long, historyEvents, historyRunLoops)
	t.Logf("history: %d events, %d run loops, written in %v", w.Events, len(w.RunLoops), time.Since(t0).Round(time.Millisecond))

	d, e := upOn(t, empty)
	eTask := answers(t, d)
	d.stop()

	// The first start folds the history once and keeps its checkpoints;
	// the figures are a restart's, as a daemon that ran on it has them.
	d, first := upOn(t, long)
	d.stop()
	t.Logf("first start on the history: ready in %v, %.1f MiB", first.ready.Round(time.Millisecond), mib(first.rss))
	d, h := upOn(t, long)
	hTask := answers(t, d)
	for _, l := range []struct {
		name string
		f    upFigures
		task int64
	}{{"empty home:  ", e, eTask}, {"long history:", h, hTask}} {
		t.Logf("%s ready in %v, RSS %.1f MiB once ready (anon %.1f, files %.1f), %.1f MiB after a task",
			l.name, l.f.ready.Round(time.Millisecond), mib(l.f.rss), mib(l.f.anon), mib(l.f.file), mib(l.task))
	}
	over := mib(h.rss - e.rss)
	t.Logf("issue 37, restarted: %.1f MiB over empty (bound %d MiB: %s), ready %.2f× empty's (bound 2×)",
		over, strictOverEmptyMiB, verdict(over <= strictOverEmptyMiB), float64(h.ready)/float64(e.ready))

	// The newest old run loops are listed, done, after the new ones.
	r := kairo(t, long, "runs", "--all", "--json", "--limit", "50")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 50 {
		t.Fatalf("runs --all --json --limit 50: %d lines\n%s", len(lines), r)
	}
	listed := map[string]string{}
	for _, line := range lines {
		var o runObj
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Fatalf("runs --json line %q: %v", line, err)
		}
		listed[o.Goal] = o.Status
	}
	for i := historyRunLoops - 1; i >= historyRunLoops-40; i-- {
		if s := listed[history.Goal(i)]; s != "done" {
			t.Fatalf("run loop %d (%q) listed as %q among the 50 newest:\n%s", i, history.Goal(i), s, r.stdout)
		}
	}
	// The listing says how to go on, and going on lists the older ones.
	m := regexp.MustCompile(`kairo runs --before (\d+)`).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("the listing of 50 does not say how to list older ones:\n%s", r)
	}
	r = kairo(t, long, "runs", "--all", "--json", "--limit", "50", "--before", m[1])
	older := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(older) != 50 {
		t.Fatalf("runs --before %s: %d lines\n%s", m[1], len(older), r)
	}
	for _, line := range older {
		var o runObj
		if err := json.Unmarshal([]byte(line), &o); err != nil || o.Status != "done" || listed[o.Goal] != "" {
			t.Fatalf("runs --before %s: %q (%v): not an older run loop, done", m[1], line, err)
		}
	}
	// The oldest is still the daemon's to show, whatever it keeps in
	// memory.
	r = kairo(t, long, "runs", "show", "--json", w.RunLoops[0])
	if r.code != 0 || !strings.Contains(r.stdout, strconv.Quote(history.Goal(0))) {
		t.Fatalf("runs show of the oldest run loop %s:\n%s", w.RunLoops[0], r)
	}
	d.stop()

	if over > 2*strictOverEmptyMiB {
		t.Errorf("kairo up restarted on %d events and %d run loops holds %.1f MiB, %.1f over an empty home's %.1f MiB (bound %d)",
			historyEvents, historyRunLoops, mib(h.rss), over, mib(e.rss), 2*strictOverEmptyMiB)
	}
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}
