package agent

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/kairo-os/kairo/abi"
)

// Some messages the runtime answers itself, without the policy: one sent
// into a run loop that has ended (answered from its record), one into a
// run loop that does not exist, and the chat's yes or no that decides an
// approval. Each is routed, so the log says it was seen and the sender
// finds the answer it caused, but never observed: no policy answers it
// again, and nothing opens a run loop for it.

// answerAside routes m in run loop loop ("" for none) without observing
// it, and says text in that run loop, caused by it.
func (r *Runtime) answerAside(ev *abi.Event, m abi.UserMessage, loop, text string) {
	m.Agent = r.cfg.Agent
	routed := r.emit(&abi.Event{Type: abi.AgentMessageSubject(r.cfg.Agent), CorrelationID: loop, CausationID: ev.ID}, m)
	r.emit(&abi.Event{Type: abi.SubjectAgentAction, CorrelationID: loop, CausationID: routed.ID},
		abi.ActionEvent{Type: abi.ActionSay, ActionData: abi.ActionData{Text: text}})
}

// notOpen answers a message that names a run loop not open: from the run
// loop's record when it has ended, else that there is no such run loop.
// False when the message names none, or an open one (the policy answers
// it there). Called under r.mu, which it releases while it publishes.
func (r *Runtime) notOpen(ev *abi.Event, m *abi.UserMessage) bool {
	if m.RunLoopID == "" {
		return false
	}
	l := r.st.loopNamed(m.RunLoopID)
	if l != nil && l.status == "" {
		return false
	}
	if l == nil && r.st.evicted > 0 && len(m.RunLoopID) >= 4 {
		// Maybe one the state let go: its record is in the log, read off
		// the bus's delivery, as a page of kairo runs reads it — one such
		// read at a time, whoever sends how many.
		select {
		case r.oldLookup <- struct{}{}:
		default:
			loop, text := "", fmt.Sprintf("Task %q is not among the newest, and the log is being read for another such question; ask again in a moment.", m.RunLoopID)
			r.mu.Unlock()
			defer r.mu.Lock()
			r.answerAside(ev, *m, loop, text)
			return true
		}
		known := make(map[string]bool, len(r.st.loops))
		for id := range r.st.loops {
			known[id] = true
		}
		c, mm := copyEvent(ev), *m
		r.wg.Add(1)
		go func() { // owned by the runtime: ends with its context
			defer r.wg.Done()
			defer func() { <-r.oldLookup }()
			old, _, err := r.loopsFromLog(r.ctx, abi.RunsParams{ID: mm.RunLoopID, Limit: 2, All: true}, math.MaxUint64, 0, known)
			loop, text := "", noLoopText(mm.RunLoopID)
			switch {
			case err != nil:
				if r.ctx.Err() != nil {
					return
				}
				text = fmt.Sprintf("Task %q is not among the newest; reading the log for it failed: %v", mm.RunLoopID, err)
			case len(old) == 1:
				loop, text = old[0].id, endedText(old[0], time.Now())
			case len(old) > 1:
				text = fmt.Sprintf("%q names more than one task; give more of its ID (`kairo runs --all` lists them).", mm.RunLoopID)
			}
			r.answerAside(&c, mm, loop, text)
		}()
		return true
	}
	loop, text := "", noLoopText(m.RunLoopID)
	if l != nil {
		loop, text = l.id, endedText(l, time.Now())
	}
	r.mu.Unlock()
	defer r.mu.Lock()
	r.answerAside(ev, *m, loop, text)
	return true
}

func noLoopText(id string) string {
	return fmt.Sprintf("There is no task %q (`kairo runs` lists them with their IDs); nothing was started.", id)
}

// endedText is what the record of the ended run loop l says: its goal,
// how and when it ended, what it ran, and its last answer before it ended.
// Called under r.mu.
func endedText(l *runLoop, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Task `%s` (%q) has ended: %s", shortLoopID(l.id), l.goal, strings.ReplaceAll(l.status, "_", " "))
	if !l.ended.IsZero() {
		fmt.Fprintf(&b, ", %s ago", now.Sub(l.ended).Round(time.Second))
	}
	fmt.Fprintf(&b, "; nothing of it runs. It ran: %s.", summarize(l))
	for i := min(l.endActions, len(l.actions)) - 1; i >= 0; i-- {
		if a := l.actions[i]; a.typ == abi.ActionSay && a.text != "" {
			b.WriteString(" Its last answer: " + a.text)
			break
		}
	}
	if !strings.HasSuffix(b.String(), "\n") {
		b.WriteString("\n")
	}
	b.WriteString("(To start something new, send it without --run.)")
	return b.String()
}

// shortLoopID is the end of a run loop id that `kairo runs` shows.
func shortLoopID(id string) string {
	if len(id) > 8 {
		return id[len(id)-8:]
	}
	return id
}

// decidedText is the chat's answer to a decision it took: the action a
// decided for, whether it runs.
func decidedText(a *action, rerun, yes bool) string {
	what := "`" + describeCall(a) + "`"
	switch {
	case yes && rerun:
		return "approved: " + what + " runs again, with what the sandbox refused it."
	case yes:
		return "approved: " + what + " runs."
	case rerun:
		return "denied: " + what + " does not run again."
	}
	return "denied: " + what + " does not run."
}
