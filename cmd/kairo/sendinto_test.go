package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// intentsStarted counts the run loops the log says were opened.
func intentsStarted(t *testing.T, home string) int {
	t.Helper()
	n := 0
	for _, ev := range eventLog(t, home) {
		if ev.Type == "kairo.intent.started" {
			n++
		}
	}
	return n
}

// `kairo send --run ID` into a task that has ended is answered from that
// task's record, in it, and opens nothing — with nothing running and with
// another task running; an unknown ID is said to be unknown and opens
// nothing. The control: a plain send still opens a task.
func TestSendIntoEndedTask(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	d := startUp(t, home)
	if r := kairo(t, home, "send", "run echo hello"); r.code != 0 || !strings.Contains(r.stdout, "`echo hello` finished in") {
		t.Fatalf("send run echo hello:\n%s", r)
	}
	echo := runsJSON(t, home)["run echo hello"]
	if echo.Status != "done" {
		t.Fatalf("the echo task %+v; want done", echo)
	}
	ask := func(what string) string {
		t.Helper()
		start := time.Now()
		r := kairo(t, home, "send", "--run", shortID(echo.ID), "how far along is it?")
		if r.code != 0 {
			t.Fatalf("%s: send --run:\n%s", what, r)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("%s: the answer took %v", what, took)
		}
		for _, want := range []string{"Task `" + shortID(echo.ID) + "` (\"run echo hello\") has ended: done", "It ran: echo hello (done)", "hello"} {
			if !strings.Contains(r.stdout, want) {
				t.Fatalf("%s: the answer lacks %q:\n%s", what, want, r)
			}
		}
		if strings.Contains(r.stdout, "· task") {
			t.Fatalf("%s: the question opened a task:\n%s", what, r)
		}
		return r.stdout
	}

	// Nothing running.
	ask("nothing running")
	if n := intentsStarted(t, home); n != 1 {
		t.Fatalf("%d run loops after the question into the ended task, want 1", n)
	}
	// The answer is in the ended task's run loop, caused by the question.
	var routed, answer string
	for _, ev := range eventLog(t, home) {
		switch {
		case ev.Type == "kairo.agent.default.message" && ev.Data["text"] == "how far along is it?":
			routed = ev.ID
			if ev.Correlation != echo.ID {
				t.Fatalf("the question was routed in %q, want the task %s", ev.Correlation, echo.ID)
			}
		case ev.Type == "kairo.agent.action" && ev.Causation == routed && routed != "":
			answer = ev.Correlation
		}
	}
	if answer != echo.ID {
		t.Fatalf("the answer is in run loop %q, want %s", answer, echo.ID)
	}

	// Another task running: the answer is still about the named one.
	if r := kairo(t, home, "send", "--no-follow", "run sleep 300"); r.code != 0 {
		t.Fatalf("run sleep 300:\n%s", r)
	}
	until(t, "`sleep 300` running", func() bool { return runsJSON(t, home)["run sleep 300"].InProgress == 1 })
	if out := ask("another task running"); strings.Contains(out, "sleep 300") {
		t.Fatalf("the answer describes the other task:\n%s", out)
	}
	if n := intentsStarted(t, home); n != 2 {
		t.Fatalf("%d run loops, want 2 (echo, sleep)", n)
	}

	// An unknown task: said so, nothing opened.
	r := kairo(t, home, "send", "--run", "nosuchtask", "how far along is it?")
	if r.code != 0 || !strings.Contains(r.stdout, `There is no task "nosuchtask"`) || strings.Contains(r.stdout, "sleep 300") {
		t.Fatalf("send --run nosuchtask:\n%s", r)
	}
	if n := intentsStarted(t, home); n != 2 {
		t.Fatalf("%d run loops after a message into no task, want 2", n)
	}

	// The control: a plain send opens a task.
	if r := kairo(t, home, "send", "run echo again"); r.code != 0 || !strings.Contains(r.stdout, "· task") {
		t.Fatalf("send run echo again:\n%s", r)
	}
	if n := intentsStarted(t, home); n != 3 {
		t.Fatalf("%d run loops after a plain send, want 3", n)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d", code)
	}
}

// The chat's "yes" to the one pending approval decides it and is answered
// at once, in the approval's run loop: `kairo send` prints the answer and
// returns. The control: a "yes" with nothing pending goes to the policy as
// before, and decides nothing.
func TestSendYesAnswered(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	out := sharedDir(t)
	installSkill(t, home, "stamp", stampSkill(out))
	d := startUp(t, home)

	// The control first: nothing pending.
	r := kairo(t, home, "send", "--wait", "20s", "yes")
	if strings.Contains(r.stdout, "approved:") {
		t.Fatalf("yes with nothing pending:\n%s", r)
	}
	controlRouted := false
	for _, ev := range eventLog(t, home) {
		if ev.Type == "kairo.approval.decided" {
			t.Fatalf("a yes with nothing pending decided %v", ev.Data)
		}
		if ev.Type == "kairo.agent.default.message" && ev.Data["text"] == "yes" {
			controlRouted = true
		}
	}
	if !controlRouted {
		t.Fatal("the yes with nothing pending was not routed to the policy")
	}

	ap := askStamp(t, d, out)
	start := time.Now()
	r = kairo(t, home, "send", "yes")
	took := time.Since(start)
	if r.code != 0 || !strings.Contains(r.stdout, "approved: `stamp dir="+out+"` runs.") {
		t.Fatalf("send yes:\n%s", r)
	}
	if took > 10*time.Second {
		t.Fatalf("send yes took %v", took)
	}
	until(t, "the approved run", func() bool { return lineCount(filepath.Join(out, "out")) == 1 })
	var loop string
	for _, ev := range eventLog(t, home) {
		switch {
		case ev.Type == "kairo.approval.decided" && ev.Causation == ap.ID:
			loop = ev.Correlation
			if ev.Data["approved"] != true {
				t.Fatalf("decided %v; want approved", ev.Data)
			}
		case ev.Type == "kairo.agent.action" && strings.HasPrefix(asString(ev.Data["text"]), "approved:"):
			if ev.Correlation != loop || loop == "" {
				t.Fatalf("the answer is in run loop %q, want the approval's %q", ev.Correlation, loop)
			}
		}
	}
	if loop == "" {
		t.Fatal("the approval was not decided")
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d", code)
	}
}

func asString(v any) string {
	s, _ := v.(string)
	return s
}

// A message the agent only answers — "help", "stop it" with nothing
// running — is a conversation: `kairo send` names no task, `kairo runs`
// leaves it out and `--all` lists it, marked, and its record is still there
// to show. The control: a command is a task in each of those.
func TestConversationIsNoTask(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	d := startUp(t, home)
	for _, text := range []string{"help", "stop it"} {
		r := kairo(t, home, "send", text)
		if r.code != 0 || strings.TrimSpace(r.stdout) == "" {
			t.Fatalf("send %q:\n%s", text, r)
		}
		if strings.Contains(r.stdout, "· task") {
			t.Errorf("send %q named a task:\n%s", text, r)
		}
	}
	r := kairo(t, home, "send", "run echo hi")
	if r.code != 0 || !strings.Contains(r.stdout, "· task") {
		t.Fatalf("send run echo hi names no task:\n%s", r)
	}
	until(t, "the three run loops ended", func() bool {
		n := 0
		for _, ev := range eventLog(t, home) {
			if ev.Type == "kairo.intent.ended" {
				n++
			}
		}
		return n == 3
	})

	runs := runsJSON(t, home)
	if len(runs) != 1 || runs["run echo hi"].Status != "done" || runs["run echo hi"].Conversation {
		t.Fatalf("kairo runs lists %+v; want the echo task alone", runs)
	}
	all := runsJSON(t, home, "--all")
	for _, text := range []string{"help", "stop it"} {
		if o, ok := all[text]; !ok || !o.Conversation || o.Status != "done" {
			t.Errorf("kairo runs --all: %q is %+v, want a conversation, done", text, o)
		}
	}
	if o := all["run echo hi"]; o.Conversation {
		t.Errorf("kairo runs --all marks the echo task a conversation: %+v", o)
	}
	if out := kairo(t, home, "runs").stdout; strings.Contains(out, "help") || !strings.Contains(out, "run echo hi") {
		t.Errorf("kairo runs:\n%s", out)
	}
	if r := kairo(t, home, "runs", "show", shortID(all["help"].ID)); r.code != 0 || !strings.Contains(r.stdout, "help") {
		t.Errorf("kairo runs show of the conversation:\n%s", r)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d", code)
	}
}
