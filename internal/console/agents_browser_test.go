package console_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleAgents: with two agents in one daemon, each run loop is
// labelled with the agent it belongs to — one "@ops" addressed, one the
// default agent's, one the send box's agent select sent to ops, one "@ID"
// in the box sent elsewhere than the select says — and the run loop ops
// opens for the default agent's ask says who asked. The chat heads each
// answer with its agent. In a real browser against a real daemon, as
// browser_test.go; TestConsoleStory is the control with one agent, whose
// label is not shown.
func TestConsoleAgents(t *testing.T) {
	t.Parallel()
	home := newHome(t)
	cfg := filepath.Join(home, "kairo.toml")
	text, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	text = append(text, "\n[agents.ops]\npolicy = \"rules\"\ndescription = \"runs builds\"\n[agents.ops.grants]\ncommands = true\n"...)
	if err := os.WriteFile(cfg, text, 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, home)
	b := newBrowser(t)
	b.open(d.url())
	b.wait("the agent select", `!document.getElementById("agent").hidden && [...document.querySelectorAll("#agent option")].map(o => o.value + "=" + o.textContent).join() === "=default (default),ops=ops"`, 30*time.Second)

	label := func(goal, want string) {
		t.Helper()
		loop := loopWith(goal)
		b.wait("the run loop "+goal, loop+` && `+loop+`.classList.contains("s-done")`, time.Minute)
		if got := eval[string](b, loop+`.querySelector(".loop-agent").textContent`); got != want {
			t.Errorf("the run loop %q is labelled %q, want %q", goal, got, want)
		}
		if !eval[bool](b, loop+`.querySelector(".loop-agent").checkVisibility()`) {
			t.Errorf("the agent label of %q is not shown", goal)
		}
	}
	kairo(t, home, "send", "@ops run echo at-ops")
	label("run echo at-ops", "ops")
	kairo(t, home, "send", "run echo at-default")
	label("run echo at-default", "default")

	// The send box: to the agent its select names, unless the text
	// names another with "@ID".
	send := func(text string) {
		t.Helper()
		b.do(
			chromedp.SetValue(chromedp.ID("agent"), "ops"),
			chromedp.SetValue(chromedp.ID("text"), text),
			chromedp.Click(chromedp.CSS(`#send button`)),
		)
	}
	send("run echo from-select")
	label("run echo from-select", "ops")
	send("@default run echo named-in-text")
	label("run echo named-in-text", "default")

	kairo(t, home, "send", "ask ops: run echo asked")
	label("run echo asked", "ops · asked by default")
	label("ask ops: run echo asked", "default")

	b.wait("an answer of ops headed ops", `[...document.querySelectorAll("#messages .agent")].some(m => m.querySelector(".who").textContent === "ops" && m.textContent.includes("at-ops"))`, 10*time.Second)
	if got := eval[string](b, `[...document.querySelectorAll("#messages .user")].find(m => m.textContent.includes("from-select")).querySelector(".who").textContent`); !strings.Contains(got, "ops") {
		t.Errorf("the message the select sent to ops is headed %q", got)
	}
	b.screenshot("agents")
	b.clean()
}
