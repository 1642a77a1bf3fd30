package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host"
	"github.com/vmihailenco/msgpack/v5"
)

func runReplayRun(ctx context.Context, args []string) error {
	f := newFlags("replay", "kairo replay --run ID [--home DIR] [--config FILE]", `
Re-run a run loop's decisions against the log: the agent's policy plugin,
alone in a kernel of its own, is handed each recorded tick again, its
model answered from the recorded kairo.llm.response events, and what it
decides is compared with what it decided then. Nothing reaches the model,
the log or a process. Prints the first decision that differs and exits 1,
or says the run replayed as recorded.

With kairo up running on the data folder, the daemon replays; without, the
log is read from the data folder directly.`)
	run := f.String("run", "", "the run loop `ID` (or its end, as `kairo runs` shows it)")
	homeFlag := f.String("home", "", "the data folder `DIR` (default $KAIRO_HOME, else ./.kairo)")
	configFlag := f.String("config", "", "read `FILE` over the built-in defaults (default: kairo.toml in the data folder, if it exists)")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	if *run == "" {
		return &usageError{msg: "replay: give the run loop: kairo replay --run ID (`kairo runs` lists them)"}
	}
	dir := *homeFlag
	if dir == "" {
		dir = clientHome().dir // the running daemon's, from any folder
	}
	home, err := dataFolder(dir)
	if err != nil {
		return err
	}
	var rep *abi.AgentReplayReport
	var outside []outsideTick
	lock, err := host.LockHome(home)
	if err == nil {
		rep, outside, err = replayOffline(ctx, home, *configFlag, *run, lock)
	} else {
		rep, outside, err = replayOnline(ctx, *run)
	}
	if err != nil {
		return err
	}
	return printReplay(os.Stdout, rep, outside)
}

// replayOnline asks the running daemon.
func replayOnline(ctx context.Context, run string) (*abi.AgentReplayReport, []outsideTick, error) {
	c, err := dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	var rep abi.AgentReplayReport
	if err := c.Call(ctx, abi.MethodAgentReplay, abi.AgentReplayParams{RunLoop: run}, &rep); err != nil {
		return nil, nil, callError("kairo replay", err)
	}
	if rep.Unrecorded == 0 {
		return &rep, nil, nil
	}
	var evs []abi.Event
	_, err = c.Replay(ctx, abi.ReplayParams{Pattern: abi.SubjectAll}, func(ev *abi.Event) error {
		if ev.CorrelationID == rep.RunLoop {
			e := *ev
			e.Data = append([]byte(nil), ev.Data...)
			evs = append(evs, e)
		}
		return nil
	})
	if err != nil {
		return nil, nil, callError("kairo replay", err)
	}
	return &rep, outsideTicks(evs, rep.RunLoop), nil
}

// replayOffline reads the data folder's log itself, through a daemon in
// the Replaying mode: no daemon runs on it, and lock is its lock, which the
// replaying daemon owns from here on.
func replayOffline(ctx context.Context, home, cfgPath, run string, lock *os.File) (*abi.AgentReplayReport, []outsideTick, error) {
	cfg, err := loadConfig(home, cfgPath)
	if err != nil {
		lock.Close()
		return nil, nil, err
	}
	d := host.New(host.Config{Mode: host.Replaying, Home: home, Config: cfg, Lock: lock, Version: version,
		Logger: slog.New(slog.DiscardHandler)})
	if err := d.Start(); err != nil {
		return nil, nil, err
	}
	defer d.Stop(ctx)
	rep, evs, err := d.Replay(ctx, run)
	if err != nil {
		return nil, nil, err
	}
	return rep, outsideTicks(evs, rep.RunLoop), nil
}

func printReplay(w io.Writer, rep *abi.AgentReplayReport, outside []outsideTick) error {
	fmt.Fprintf(w, "run loop %s %q\n", termLine(rep.RunLoop), rep.Goal)
	fmt.Fprintf(w, "replayed %d decisions (ticks %d–%d): %d actions, %d thoughts, %d recorded model answers\n",
		rep.Decisions, rep.FirstTick, rep.LastTick, rep.Actions, rep.Thoughts, rep.Answers)
	// The replay counts as unrecorded both what the agent's runtime said
	// itself, outside a tick, and a decision whose tick record a crash
	// cut off: each is named for what it was.
	rest := rep.Unrecorded
	if n := min(len(outside), rest); n > 0 {
		outside = outside[len(outside)-n:]
		rest -= n
		fmt.Fprintf(w, "not replayed: %s the agent's runtime made itself, not the policy at a tick:\n", nDecisions(n))
		for _, o := range outside {
			fmt.Fprintf(w, "  %s\n", termLine(o.describe()))
		}
	}
	if rest > 0 {
		fmt.Fprintf(w, "not replayed: %s whose tick the log does not record (the daemon stopped as it decided)\n", nDecisions(rest))
	}
	if d := rep.Divergence; d != nil {
		fmt.Fprintf(w, "DIVERGED at tick %d (decision %d of %d): %s\n", d.Tick, d.Decision, rep.Decisions, termText(d.What))
		return exitCode(1)
	}
	fmt.Fprintln(w, "the policy decided as recorded")
	return nil
}

// nDecisions is "1 decision", "2 decisions".
func nDecisions(n int) string {
	if n == 1 {
		return "1 decision"
	}
	return fmt.Sprintf("%d decisions", n)
}

// outsideTick is an action or thought of a run loop that the agent's
// runtime made itself, outside any tick (tick 0): the closing words of a
// canceled run loop, the word that a task was interrupted. The policy did
// not decide it, so a replay has nothing to compare it with.
type outsideTick struct {
	what string // "say", "thought", ...
	text string
	// why is what the runtime answered, when it answered a cancel: who
	// asked and the reason.
	why string
}

func (o outsideTick) describe() string {
	s := fmt.Sprintf("%s %q", o.what, o.text)
	if o.why != "" {
		s += " (" + o.why + ")"
	}
	return s
}

// outsideTicks finds them in the events evs of run loop loop.
func outsideTicks(evs []abi.Event, loop string) []outsideTick {
	byID := map[string]*abi.Event{}
	ended := map[string]string{}  // the status the run loop ended with, by what caused the end
	var canceled *abi.ActionEvent // the policy's last cancel of the run loop
	for i := range evs {
		ev := &evs[i]
		byID[ev.ID] = ev
		if ev.CorrelationID != loop {
			continue
		}
		var d abi.IntentEnded
		var a abi.ActionEvent
		switch {
		case ev.Type == abi.SubjectIntentEnded && msgpack.Unmarshal(ev.Data, &d) == nil:
			ended[ev.CausationID] = d.Status
		case ev.Type == abi.SubjectAgentAction && msgpack.Unmarshal(ev.Data, &a) == nil && a.Type == abi.ActionCancel && a.Tick != 0:
			canceled = &a
		}
	}
	var out []outsideTick
	for i := range evs {
		ev := &evs[i]
		if ev.CorrelationID != loop || !strings.HasPrefix(ev.Source, "agent/") {
			continue
		}
		var o outsideTick
		switch ev.Type {
		case abi.SubjectAgentAction:
			var a abi.ActionEvent
			if msgpack.Unmarshal(ev.Data, &a) != nil || a.Tick != 0 {
				continue
			}
			o = outsideTick{what: a.Type, text: a.Text}
		case abi.SubjectAgentThought:
			var th abi.Thought
			if msgpack.Unmarshal(ev.Data, &th) != nil || th.Tick != 0 {
				continue
			}
			o = outsideTick{what: "thought", text: th.Text}
		default:
			continue
		}
		o.why = why(byID[ev.CausationID], ended[ev.CausationID], canceled)
		out = append(out, o)
	}
	return out
}

// why says what the runtime answered with a decision of its own caused by
// cause (nil when none), which ended the run loop with status (or ""); the
// policy's cancel of the run loop is canceled (or nil).
func why(cause *abi.Event, status string, canceled *abi.ActionEvent) string {
	if cause == nil {
		if status == "canceled" && canceled != nil {
			return fmt.Sprintf("the run loop was canceled by the policy at tick %d: %s", canceled.Tick, orDash(canceled.Reason))
		}
		return ""
	}
	switch cause.Type {
	case abi.SubjectIntentCancel:
		var p abi.CancelParams
		msgpack.Unmarshal(cause.Data, &p)
		s := "the run loop was stopped by hand: a cancel from " + cause.Source
		if p.Reason != "" {
			s += ", " + p.Reason
		}
		return s
	case abi.SubjectUserMessage:
		var m abi.UserMessage
		msgpack.Unmarshal(cause.Data, &m)
		if status == "canceled" {
			return fmt.Sprintf("the run loop was canceled as the user's %q asked", m.Text)
		}
		return fmt.Sprintf("answering the user's %q", m.Text)
	}
	return ""
}
