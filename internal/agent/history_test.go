package agent

import (
	"context"
	"fmt"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// writeHistory publishes total events of run loops into e's log, as the
// kernel and the agent write them — a message, its routing, the start, a
// spawn with its process, a note, an answer and the end — each from the
// source the agent trusts for it; every openEvery-th run loop (0: none)
// is left open, its process running. It returns how many run loops it
// began. Ids begin with prefix, so a second call adds to the first.
func writeHistory(tb testing.TB, e *env, prefix string, total, openEvery int) int {
	tb.Helper()
	evs := make([]*abi.Event, 0, 1000)
	enc := func(v any) []byte { raw, _ := msgpack.Marshal(v); return raw }
	n, loop := 0, 0
	for ; n < total; loop++ {
		id := fmt.Sprintf(prefix+"loop-%d", loop)
		act := fmt.Sprintf(prefix+"act-%d", loop)
		msg := fmt.Sprintf(prefix+"routed-%d", loop)
		pid := fmt.Sprintf(prefix+"p%d", loop)
		chain := []abi.Event{
			{Type: abi.SubjectUserMessage, Source: "cli", Data: enc(abi.UserMessage{Text: "run make", MessageID: "m" + id})},
			{ID: msg, Type: abi.AgentMessageSubject("default"), Data: enc(abi.UserMessage{Text: "run make", MessageID: "m" + id})},
			{Type: abi.SubjectIntentStarted, CorrelationID: id, CausationID: msg, Data: enc(abi.IntentStarted{RunLoopID: id, Agent: "default", Goal: "run make", MessageID: "m" + id})},
			{ID: act, Type: abi.SubjectAgentAction, CorrelationID: id, CausationID: msg, Data: enc(abi.ActionEvent{Type: abi.ActionToolCall, ActionData: abi.ActionData{Tool: abi.MethodProcessSpawn, Args: `{"command":"make"}`}})},
			{Type: abi.SubjectToolInvoke, CorrelationID: id, CausationID: act, Data: enc(abi.ToolInvoke{ActionID: act, Tool: abi.MethodProcessSpawn})},
			{Type: abi.SubjectToolResult, CorrelationID: id, CausationID: act, Data: enc(abi.ToolResultEvent{ActionID: act, Tool: abi.MethodProcessSpawn, Status: abi.StatusDone, ProcessID: pid})},
			{Type: abi.SubjectProcessSpawned, Source: procSource, CorrelationID: id, CausationID: act, Data: enc(abi.ProcessSpawned{ProcessID: pid, Argv: []string{"make"}, PID: 1000 + loop})},
			{Type: abi.SubjectProcessProgress, Source: procSource, CorrelationID: id, CausationID: act, Data: enc(map[string]any{"processId": pid, "values": map[string]any{"percent": 50}})},
		}
		if openEvery == 0 || loop%openEvery != openEvery-1 {
			chain = append(chain,
				abi.Event{Type: abi.SubjectProcessExited, Source: procSource, CorrelationID: id, CausationID: act, Data: enc(map[string]any{"processId": pid, "exitCode": 0, "durationMs": 1200})},
				abi.Event{Type: abi.SubjectAgentNote, CorrelationID: id, Data: enc(abi.Note{RunLoopID: id, ProcessID: pid, Status: abi.StatusDone, LastLines: []string{"ok"}})},
				abi.Event{Type: abi.SubjectAgentAction, CorrelationID: id, Data: enc(abi.ActionEvent{Type: abi.ActionSay, ActionData: abi.ActionData{Text: "make finished", Done: true}})},
				abi.Event{Type: abi.SubjectIntentEnded, CorrelationID: id, Data: enc(abi.IntentEnded{RunLoopID: id, Status: abi.StatusDone})},
			)
		}
		for i := range chain {
			if n == total {
				break
			}
			ev := chain[i]
			if ev.Source == "" {
				ev.Source = "agent/default"
			}
			evs = append(evs, &ev)
			n++
		}
		if len(evs) >= 1000 || n == total {
			if _, err := e.bus.PublishBatch(context.Background(), evs); err != nil {
				tb.Fatal(err)
			}
			evs = evs[:0]
		}
	}
	return loop
}
