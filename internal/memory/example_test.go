package memory_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/memory"
)

// A run loop that ended is cut into segments and indexed; a later question
// finds its chunk, and the anchor leads back to the run loop around it.
func Example() {
	dir, err := os.MkdirTemp("", "memory-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := memory.Open(filepath.Join(dir, "memory.db"), memory.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	// The events of one run loop, as the agent runtime records them.
	at := time.Date(2025, 5, 2, 10, 0, 0, 0, time.UTC)
	var events []abi.Event
	add := func(typ string, data any) string {
		raw, _ := msgpack.Marshal(data)
		at = at.Add(time.Second)
		id := fmt.Sprint("ev-", len(events))
		events = append(events, abi.Event{ID: id, Type: typ, Time: at, Data: raw, CorrelationID: "rl-1", Seq: uint64(len(events) + 1)})
		return id
	}
	add(abi.SubjectIntentStarted, abi.IntentStarted{RunLoopID: "rl-1", Goal: "free some disk space on web-03"})
	call := add(abi.SubjectAgentAction, abi.ActionEvent{Type: abi.ActionToolCall, ActionData: abi.ActionData{Tool: "run_skill", Args: `{"command":"docker system prune -af"}`}, Tick: 1})
	result, _ := msgpack.Marshal("Total reclaimed space: 33.2GB")
	add(abi.SubjectToolResult, abi.ToolResultEvent{ActionID: call, Tool: "run_skill", Status: abi.StatusDone, Result: result})
	add(abi.SubjectAgentAction, abi.ActionEvent{Type: abi.ActionSay, ActionData: abi.ActionData{Text: "Freed 33 GB on web-03.", Done: true}, Tick: 2})

	ctx := context.Background()
	if err := store.Index(ctx, "rl-1", memory.Segments(events, memory.SegmentConfig{})); err != nil {
		log.Fatal(err)
	}
	chunks, err := store.Retrieve(ctx, "how much space did the docker prune reclaim?", 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(chunks[0].Anchor, chunks[0].Text)
	around, err := store.Expand(ctx, chunks[0].Anchor, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("before:", around.Before[0].Text)
	fmt.Println("after:", around.After[0].Text)
	// Output:
	// rl-1#0.2(tool_result) run_skill done: Total reclaimed space: 33.2GB
	// before: call run_skill {"command":"docker system prune -af"}
	// after: Freed 33 GB on web-03.
}
