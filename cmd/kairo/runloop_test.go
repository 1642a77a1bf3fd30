package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// logged is one event of `kairo events replay --json`.
type logged struct {
	Seq         uint64         `json:"seq"`
	ID          string         `json:"id"`
	Type        string         `json:"type"`
	Correlation string         `json:"correlationId"`
	Causation   string         `json:"causationId"`
	Data        map[string]any `json:"data"`
}

// eventLog is the daemon's log as `kairo events replay --json` prints it.
func eventLog(t *testing.T, home string) []logged {
	t.Helper()
	r := kairo(t, home, "events", "replay", "--json", "kairo.>")
	if r.code != 0 {
		t.Fatalf("events replay:\n%s", r)
	}
	var out []logged
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev logged
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		out = append(out, ev)
	}
	return out
}

// runObj is one line of `kairo runs --json`.
type runObj struct {
	ID         string `json:"id"`
	Agent      string `json:"agent"`
	Goal       string `json:"goal"`
	Status     string `json:"status"`
	InProgress int    `json:"inProgress"`
	EndedAt    string `json:"endedAt"`
	// Conversation: the run loop only answered.
	Conversation bool `json:"conversation"`
	// Ask: the run loop answers another agent's ask.
	Ask *struct {
		Agent  string `json:"agent"`
		Grants string `json:"grants"`
	} `json:"ask"`
}

// runsJSON is `kairo runs --json` by goal: of two run loops with one
// goal, the older.
func runsJSON(t *testing.T, home string, flags ...string) map[string]runObj {
	t.Helper()
	m := map[string]runObj{}
	for _, o := range runList(t, home, flags...) {
		m[o.Goal] = o
	}
	return m
}

// runList is `kairo runs --json` as it lists them, newest first.
func runList(t *testing.T, home string, flags ...string) []runObj {
	t.Helper()
	r := kairo(t, home, append([]string{"runs", "--json"}, flags...)...)
	if r.code != 0 {
		t.Fatalf("runs --json:\n%s", r)
	}
	var out []runObj
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var o runObj
		if err := json.Unmarshal([]byte(line), &o); err != nil || o.ID == "" || o.Status == "" {
			t.Fatalf("runs --json line %q: %v", line, err)
		}
		out = append(out, o)
	}
	return out
}

// firstEnded waits for the first run loop to end and returns its id.
func firstEnded(t *testing.T, home string) string {
	t.Helper()
	var loop string
	until(t, "the run loop's end", func() bool {
		for _, ev := range eventLog(t, home) {
			if ev.Type == "kairo.intent.ended" {
				loop = ev.Correlation
				return true
			}
		}
		return false
	})
	return loop
}

// until polls f for up to 30 s (the machine is shared and loaded).
func until(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 30s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The daemon dies mid-task: restarted, it lists the task as interrupted
// (in `kairo runs` and its --json), says once what was cut off, and waits;
// "again" runs it again in the same run loop, "stop" ends it. The control:
// a task that finished before the crash stays done.
func TestRunLoopInterrupted(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	d := startUp(t, home)
	if r := kairo(t, home, "send", "run echo hello"); r.code != 0 || !strings.Contains(r.stdout, "`echo hello` finished in") {
		t.Fatalf("send run echo hello:\n%s", r)
	}
	if r := kairo(t, home, "send", "--no-follow", "run sleep 30"); r.code != 0 || !strings.Contains(r.stdout, `{"command":"sleep 30"}`) {
		t.Fatalf("send run sleep 30:\n%s", r)
	}
	// The process may start a moment after the call: asked again until it
	// runs (the answer then names its process).
	until(t, "`sleep 30` running", func() bool {
		r := kairo(t, home, "send", "how far along is it?")
		return r.code == 0 && strings.Contains(r.stdout, "`sleep 30` is running (")
	})
	d.kill()

	d = startUp(t, home)
	const told = "`sleep 30` was running when Kairo stopped; it was ended. Say `again` to run it again."
	until(t, "the user told", func() bool {
		for _, ev := range eventLog(t, home) {
			if ev.Type == "kairo.agent.action" && ev.Data["text"] == told {
				return true
			}
		}
		return false
	})
	runs := runsJSON(t, home)
	sleep, echo := runs["run sleep 30"], runs["run echo hello"]
	if sleep.Status != "interrupted" || sleep.InProgress != 0 || sleep.EndedAt != "" {
		t.Fatalf("runs --json: the sleep task %+v; want interrupted, nothing running, not ended", sleep)
	}
	if echo.Status != "done" || echo.EndedAt == "" {
		t.Fatalf("runs --json: the echo task %+v; want done", echo)
	}
	if r := kairo(t, home, "runs"); !regexpMatch(`(?m)^\S+\s+.*\s+interrupted\s+\d+\s+0\s+run sleep 30$`, r.stdout) {
		t.Fatalf("kairo runs:\n%s", r)
	}
	// runs show --json: one JSON object per event of the run loop.
	r := kairo(t, home, "runs", "show", "--json", shortID(sleep.ID))
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev logged
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Correlation != sleep.ID {
			t.Fatalf("runs show --json line %q: %v", line, err)
		}
		types = append(types, ev.Type)
	}
	if all := strings.Join(types, " "); !strings.Contains(all, "kairo.process.interrupted") || !strings.HasPrefix(all, "kairo.intent.started") {
		t.Fatalf("runs show --json: %s", all)
	}

	// Restarted again (a clean stop this time), it is not told twice.
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d", code)
	}
	d = startUp(t, home)
	if r := kairo(t, home, "send", "what is running"); r.code != 0 || !strings.Contains(r.stdout, "Nothing is running.") {
		t.Fatalf("what is running:\n%s", r)
	}
	n := 0
	for _, ev := range eventLog(t, home) {
		if ev.Type == "kairo.agent.action" && ev.Data["text"] == told {
			n++
			if ev.Correlation != sleep.ID {
				t.Fatalf("told in %s, want the task %s", ev.Correlation, sleep.ID)
			}
		}
	}
	if n != 1 {
		t.Fatalf("told %d times, want once", n)
	}

	if r := kairo(t, home, "send", "--no-follow", "again"); r.code != 0 || !strings.Contains(r.stdout, `{"command":"sleep 30"}`) {
		t.Fatalf("again:\n%s", r)
	}
	until(t, "the task running again", func() bool {
		s := runsJSON(t, home)["run sleep 30"]
		return s.Status == "open" && s.InProgress == 1
	})
	if s := runsJSON(t, home)["run sleep 30"]; s.ID != sleep.ID {
		t.Fatalf("again ran in %s, want the same run loop %s", s.ID, sleep.ID)
	}
	if r := kairo(t, home, "send", "stop"); r.code != 0 {
		t.Fatalf("stop:\n%s", r)
	}
	until(t, "the task canceled", func() bool { return runsJSON(t, home)["run sleep 30"].Status == "canceled" })
	ended := 0
	for _, ev := range eventLog(t, home) {
		if ev.Type == "kairo.intent.ended" && ev.Correlation == sleep.ID {
			ended++
		}
	}
	if ended != 1 {
		t.Fatalf("%d intent.ended for the task, want 1", ended)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d", code)
	}
}

// Through `kairo up`: "use 1 instead" while `sleep 300` runs is an
// iteration of the same run loop (the cancel and the new spawn caused by
// the message, the first action's canceled result caused by the cancel,
// one intent.ended); "stop" with two tasks asks which and takes the answer
// by number; with one task left it stops at once. The control: a progress
// question opens no run loop.
func TestRunLoopBargeIn(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	d := startUp(t, home)
	if r := kairo(t, home, "send", "--no-follow", "run sleep 300"); r.code != 0 {
		t.Fatalf("run sleep 300:\n%s", r)
	}
	until(t, "`sleep 300` running", func() bool {
		r := kairo(t, home, "send", "how far along is it?")
		return r.code == 0 && strings.Contains(r.stdout, "`sleep 300` is running (")
	})
	if r := kairo(t, home, "send", "use 1 instead"); r.code != 0 || !strings.Contains(r.stdout, "running `sleep 1` instead, in the same task") {
		t.Fatalf("use 1 instead:\n%s", r)
	}
	loop := firstEnded(t, home)
	evs := eventLog(t, home)
	var started, ended int
	var change, cancel, spawn2, spawn1 string
	for _, ev := range evs {
		switch {
		case ev.Type == "kairo.intent.started":
			started++
		case ev.Type == "kairo.intent.ended" && ev.Correlation == loop:
			ended++
			if ev.Data["status"] != "done" {
				t.Fatalf("ended %v; want done", ev.Data)
			}
		case ev.Type == "kairo.agent.default.message" && ev.Data["text"] == "use 1 instead":
			change = ev.ID
		case ev.Type == "kairo.agent.action" && ev.Data["type"] == "cancel":
			cancel = ev.ID
			if ev.Correlation != loop || ev.Causation != change {
				t.Fatalf("cancel %+v; want in %s caused by %s", ev, loop, change)
			}
		case ev.Type == "kairo.agent.action" && ev.Data["args"] == `{"command":"sleep 300"}`:
			spawn1 = ev.ID
		case ev.Type == "kairo.agent.action" && ev.Data["args"] == `{"command":"sleep 1"}`:
			spawn2 = ev.ID
			if ev.Correlation != loop || ev.Causation != change {
				t.Fatalf("second spawn %+v; want in %s caused by %s", ev, loop, change)
			}
		case ev.Type == "kairo.tool.result" && ev.Data["status"] == "canceled":
			if ev.Data["actionId"] != spawn1 || ev.Causation != cancel || cancel == "" {
				t.Fatalf("canceled result %+v; want action %s's caused by the cancel %s", ev, spawn1, cancel)
			}
		}
	}
	if started != 1 || ended != 1 || spawn2 == "" || cancel == "" {
		t.Fatalf("%d run loops, %d ends, cancel %q, second spawn %q; want one run loop iterated", started, ended, cancel, spawn2)
	}

	// Two tasks: "stop" asks which.
	for _, cmd := range []string{"run sleep 30", "run sleep 40"} {
		if r := kairo(t, home, "send", "--no-follow", cmd); r.code != 0 {
			t.Fatalf("%s:\n%s", cmd, r)
		}
	}
	runs := runsJSON(t, home)
	first, second := runs["run sleep 30"], runs["run sleep 40"]
	r := kairo(t, home, "send", "stop")
	if r.code != 0 || !strings.Contains(r.stdout, "Which task do you mean? 1. `"+shortID(first.ID)+"` run sleep 30; 2. `"+shortID(second.ID)+"` run sleep 40.") {
		t.Fatalf("stop with two tasks:\n%s", r)
	}
	// send prints the first reply to the answer: the question's "Stopping"
	// or the canceled task's "Stopped", whichever the log holds first; the
	// log holds both.
	if r := kairo(t, home, "send", "2"); r.code != 0 || !strings.Contains(r.stdout, "Stopp") {
		t.Fatalf("the answer:\n%s", r)
	}
	until(t, "the answer's reply", func() bool {
		for _, ev := range eventLog(t, home) {
			if text, _ := ev.Data["text"].(string); ev.Type == "kairo.agent.action" && strings.Contains(text, "Stopping `"+shortID(second.ID)+"` (run sleep 40).") {
				return true
			}
		}
		return false
	})
	until(t, "the second task canceled", func() bool { return runsJSON(t, home)["run sleep 40"].Status == "canceled" })
	if s := runsJSON(t, home)["run sleep 30"]; s.Status != "open" || s.InProgress != 1 {
		t.Fatalf("the first task %+v; want still running", s)
	}
	// One task left: stopped without a question.
	if r := kairo(t, home, "send", "stop"); r.code != 0 || strings.Contains(r.stdout, "Which task") || !strings.Contains(r.stdout, "Stopped \"run sleep 30\"") {
		t.Fatalf("stop with one task:\n%s", r)
	}
	until(t, "the first task canceled", func() bool { return runsJSON(t, home)["run sleep 30"].Status == "canceled" })
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d", code)
	}
}
