package agent

import (
	"context"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
)

// TestForgedEventsIgnored: events of kernel subjects that the kernel did
// not publish — here written straight to the bus with another source, as
// a log something else wrote could hold them — tell the agent nothing. A
// forged exit leaves the task running and a forged cancel leaves it open;
// the control is the kernel's own cancel (through intent.cancel, as the
// operator), which closes it.
func TestForgedEventsIgnored(t *testing.T) {
	e := newEnv(t)
	e.start(Config{Policy: e.rules()})
	e.say("run sleep 30", "")
	res := decodeAs[abi.ToolResultEvent](t, e.events.until(t, "tool.result", typed(abi.SubjectToolResult)))
	loop := e.events.until(t, "intent.started", typed(abi.SubjectIntentStarted)).CorrelationID

	forge := func(typ, source string, data any) {
		raw, _ := msgpack.Marshal(data)
		if _, err := e.bus.Publish(context.Background(), &abi.Event{Type: typ, Source: source, Data: raw, CorrelationID: loop, CausationID: res.ActionID}); err != nil {
			t.Fatal(err)
		}
	}
	// An exit the process manager did not report, and a cancel no
	// principal asked for (the kernel stamps a cancel with who asked).
	forge("kairo.process.exited", "operator/0", map[string]any{"processId": res.ProcessID, "status": "exited", "exitCode": 0})
	forge(abi.SubjectIntentCancel, "kernel", abi.CancelParams{CorrelationID: loop})

	e.say("how far along is it?", "")
	e.events.until(t, "a progress answer", sayIn(loop, "`sleep 30` is running ("+res.ProcessID+")"))
	if ended := e.events.all(typed(abi.SubjectIntentEnded)); len(ended) != 0 {
		t.Fatalf("a forged event ended the run loop: %+v", ended)
	}

	// The control: the operator's cancel, through the kernel.
	raw, _ := msgpack.Marshal(abi.CancelParams{CorrelationID: loop})
	s := &session{ctx: t.Context()} // an operator's session: the zero principal
	if _, aerr := e.kernel.Invoke(t.Context(), abi.MethodIntentCancel, &kernel.Call{Session: s, Params: raw}); aerr != nil {
		t.Fatal(aerr)
	}
	e.events.until(t, "the operator's cancel", func(ev *abi.Event) bool {
		return ev.Type == abi.SubjectIntentCancel && ev.Source == "operator/0" && ev.CorrelationID == loop
	})
	e.events.until(t, "the process canceled", func(ev *abi.Event) bool {
		return ev.Type == "kairo.process.canceled" && ev.CorrelationID == loop
	})
	ended := e.events.until(t, "the loop's end", typed(abi.SubjectIntentEnded))
	if d := decodeAs[abi.IntentEnded](t, ended); d.RunLoopID != loop {
		t.Fatalf("intent.ended = %+v", d)
	}
}

// TestTrustedSources: the agent believes a user message from the operator
// or a plugin the operator installed, never from a skill (which would make
// the agent act beyond the skill's grants); a process event only from the
// process manager (or its own interrupted record).
func TestTrustedSources(t *testing.T) {
	for _, c := range []struct {
		typ, source string
		want        bool
	}{
		{abi.SubjectUserMessage, "operator/0", true},
		{abi.SubjectUserMessage, "plugin/terminal", true},
		{abi.SubjectUserMessage, "skill/pub", false},
		{"kairo.process.exited", "kernel/proc", true},
		{"kairo.process.interrupted", "agent/default", true},
		{"kairo.process.exited", "operator/0", false},
		{abi.SubjectIntentCancel, "operator/0", true},
		{abi.SubjectIntentCancel, "kernel", false},
		{abi.SubjectAgentAction, "agent/default", true},
		{abi.SubjectAgentAction, "plugin/x", false},
		{"app.order.created", "skill/x", true},
	} {
		if got := trusted(&abi.Event{Type: c.typ, Source: c.source}); got != c.want {
			t.Errorf("trusted(%s from %s) = %v, want %v", c.typ, c.source, got, c.want)
		}
	}
}
