package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host"
	"github.com/kairo-os/kairo/manifests"
	"github.com/kairo-os/kairo/sdk/client"
)

// embedded starts a daemon on a temp home, on the embedded defaults, and
// returns a client of it in process; both end with the test.
func embedded(t *testing.T) (*host.Daemon, *client.Client) {
	t.Helper()
	d := host.New(host.Config{Home: t.TempDir(), Config: manifests.Default()})
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		d.Stop(ctx)
	})
	c, err := d.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return d, c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Output larger than what a Process keeps: when Wait returns, the kept
// part is the end, whole; the lines are the last ones. A process that
// writes at once, before the spawn's response can reach the client, loses
// nothing either. The control: another client's OnChunk sees all of it.
func TestSpawnKeepsOutput(t *testing.T) {
	t.Parallel()
	_, c := embedded(t)
	ctx := testCtx(t)
	var streamed int
	c.OnChunk(func(ch *abi.StreamChunk) { streamed += len(ch.Chunk) })
	p, err := c.Spawn(ctx, abi.SpawnParams{Argv: []string{"seq", "1", "100000"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.ID(), "p") || p.Info().PID == 0 {
		t.Errorf("spawned %+v; want its id and pid", p.Info())
	}
	end, err := p.Wait(ctx)
	if err != nil || end.Status != abi.ProcessExited || *end.ExitCode != 0 {
		t.Fatalf("Wait: %+v, %v", end, err)
	}
	var want strings.Builder
	for i := 1; i <= 100000; i++ {
		fmt.Fprintln(&want, i)
	}
	all := want.String()
	if streamed != len(all) {
		t.Errorf("OnChunk saw %d bytes, want %d", streamed, len(all))
	}
	if got := string(p.Stdout()); got != all[len(all)-client.KeptOutput:] {
		t.Errorf("Stdout: %d bytes ending %q; want the last %d bytes of the output", len(got), got[max(0, len(got)-20):], client.KeptOutput)
	}
	if got := p.LastLines(2); len(got) != 2 || got[0] != "99999" || got[1] != "100000" {
		t.Errorf("LastLines(2) = %q", got)
	}
	if len(p.Stderr()) != 0 {
		t.Errorf("Stderr = %q, want nothing", p.Stderr())
	}

	// Many small processes whose output is written at once.
	for i := range 20 {
		p, err := c.Spawn(ctx, abi.SpawnParams{Argv: []string{"echo", fmt.Sprint("run ", i)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if got := string(p.Output()); got != fmt.Sprintf("run %d\n", i) {
			t.Fatalf("run %d: Output %q", i, got)
		}
	}
}

// A refused spawn is the kernel's error, typed; a process killed by a
// signal says which. Stdin reaches the process.
func TestSpawnErrorsSignalsStdin(t *testing.T) {
	t.Parallel()
	_, c := embedded(t)
	ctx := testCtx(t)
	_, err := c.Spawn(ctx, abi.SpawnParams{})
	var ae *abi.Error
	if !errors.As(err, &ae) || ae.Code != abi.CodeInvalidParams {
		t.Errorf("Spawn without argv: %v; want an *abi.Error %s", err, abi.CodeInvalidParams)
	}
	p, err := c.Spawn(ctx, abi.SpawnParams{Argv: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Signal(ctx, "KILL"); err != nil {
		t.Fatal(err)
	}
	if end, err := p.Wait(ctx); err != nil || end.Status != abi.ProcessKilled || end.Signal != "SIGKILL" {
		t.Errorf("killed: %+v, %v", end, err)
	}
	cat, err := c.Spawn(ctx, abi.SpawnParams{Argv: []string{"cat"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.WriteStdin(ctx, []byte("to cat\n")); err != nil {
		t.Fatal(err)
	}
	if err := cat.CloseStdin(ctx); err != nil {
		t.Fatal(err)
	}
	if end, err := cat.Wait(ctx); err != nil || *end.ExitCode != 0 || string(cat.Stdout()) != "to cat\n" {
		t.Errorf("cat: %+v, %v, %q", end, err, cat.Stdout())
	}
}

// Another client of the same user attaches to a running process and keeps
// its output from then on; the spawner keeps all of it.
func TestAttach(t *testing.T) {
	t.Parallel()
	d, c := embedded(t)
	ctx := testCtx(t)
	p, err := c.Spawn(ctx, abi.SpawnParams{Argv: []string{"sh", "-c", "echo early; sleep 1; echo late"}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := d.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for !strings.Contains(string(p.Output()), "early") {
		time.Sleep(10 * time.Millisecond)
	}
	a, err := other.Attach(ctx, p.ID())
	if err != nil {
		t.Fatal(err)
	}
	if a.Info().Status != abi.ProcessRunning {
		t.Errorf("attached to %+v; want it running", a.Info())
	}
	if end, err := a.Wait(ctx); err != nil || *end.ExitCode != 0 {
		t.Fatalf("Wait of the attached: %+v, %v", end, err)
	}
	if got := string(a.Output()); got != "late\n" {
		t.Errorf("the attached kept %q, want what came after it attached", got)
	}
	if _, err := p.Wait(ctx); err != nil || string(p.Output()) != "early\nlate\n" {
		t.Errorf("the spawner kept %q, %v", p.Output(), err)
	}
	if _, err := other.Attach(ctx, "p999"); err == nil {
		t.Error("Attach of no process: no error")
	}
}

// A message to the agent, as kairo send sends it: a task opens, its tool
// call and its answer come as replies, and its end is the last; then
// io.EOF. The control: a message that opens no task is answered once. A
// message to an agent that does not exist reaches none: its one reply is
// the default agent's word on that, marked NoAgent.
func TestSend(t *testing.T) {
	t.Parallel()
	_, c := embedded(t)
	ctx := testCtx(t)
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := c.Send(ctx, abi.UserMessage{Text: "run echo hi"})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close(ctx)
	if v.Message().MessageID == "" || v.Stored().Seq == 0 {
		t.Errorf("sent %+v stored %+v; want an id and a seq", v.Message(), v.Stored())
	}
	var kinds []string
	var ended *abi.IntentEnded
	for {
		r, err := v.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Next: %v (so far %v)", err, kinds)
		}
		switch {
		case r.Action != nil:
			kinds = append(kinds, r.Action.Type)
		case r.Ended != nil:
			kinds, ended = append(kinds, "ended"), r.Ended
		case r.Error != nil:
			t.Errorf("the agent failed: %s", r.Error.Error)
		}
		if r.RunLoopID == "" {
			t.Errorf("reply %s without its run loop", r.Event.Type)
		}
	}
	if ended == nil || ended.RunLoopID != v.RunLoopID() || !strings.Contains(strings.Join(kinds, " "), abi.ActionToolCall) {
		t.Errorf("replies %v, ended %+v (run loop %q); want a tool call, then the end of the task", kinds, ended, v.RunLoopID())
	}

	w, err := c.Send(ctx, abi.UserMessage{Text: "what is running"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	r, err := w.Next(ctx)
	if err != nil || r.Action == nil || r.Action.Text == "" {
		t.Fatalf("what is running: %+v, %v", r, err)
	}
	for !r.Last {
		if r, err = w.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Next(ctx); err != io.EOF {
		t.Errorf("Next after the last reply: %v, want io.EOF", err)
	}
	if r.NoAgent {
		t.Error("an answer of the default agent is marked NoAgent")
	}

	x, err := c.Send(ctx, abi.UserMessage{Text: "run echo hi", Agent: "nobody"})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close(ctx)
	r, err = x.Next(ctx)
	if err != nil || !r.NoAgent || !r.Last || r.Action == nil || !strings.Contains(r.Action.Text, `There is no agent "nobody"`) || r.Event.CausationID != x.Stored().ID {
		t.Fatalf("a message to no agent: %+v, %v; want the answer to it, caused by it, the last", r, err)
	}
	if _, err := x.Next(ctx); err != io.EOF {
		t.Errorf("Next after the answer to a message to no agent: %v, want io.EOF", err)
	}
}

// Typed events: the data of a subscription's event decodes into its abi type.
func TestDecodeData(t *testing.T) {
	t.Parallel()
	_, c := embedded(t)
	ctx := testCtx(t)
	sub, err := c.Subscribe(ctx, abi.SubjectProcessExited, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Spawn(ctx, abi.SpawnParams{Argv: []string{"false"}})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := sub.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	x, err := client.DecodeData[abi.ProcessExitedEvent](ev)
	if err != nil || x.ProcessID != p.ID() || x.ExitCode == nil || *x.ExitCode != 1 {
		t.Errorf("DecodeData: %+v, %v", x, err)
	}
	if _, err := client.DecodeData[abi.ProcessExitedEvent](&abi.Event{Type: "x", Data: []byte{0xc1}}); err == nil {
		t.Error("DecodeData of garbage: no error")
	}
	if _, err := c.PublishData(ctx, "app.order.created", map[string]int{"id": 7}); err != nil {
		t.Error(err)
	}
}
