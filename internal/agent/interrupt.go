package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kairo-os/kairo/abi"
)

// After a restart, an action the log shows in progress whose process this
// kernel does not run died with the daemon before: it is recorded as
// interrupted — once its process is known to be gone — and the user is told
// once, in its run loop, which then waits for the user ("again" runs it
// again) instead of asking the policy every heartbeat.

// interruptPoll is how often a process that outlived the daemon is looked
// for again.
const interruptPoll = 100 * time.Millisecond

// lost is an action in progress that the restarted daemon does not run.
type lost struct {
	id, loop, tool, processID string
	pid                       int
	spawned                   time.Time
	what                      string // the command, for the user
}

// markInterrupted records each action the log shows in progress whose
// process this kernel does not run: at once when its process is gone, else
// when it is (a goroutine of the runtime's looks).
func (r *Runtime) markInterrupted() {
	r.mu.Lock()
	var gone, alive []lost
	for _, l := range r.st.open {
		for _, a := range l.inProgress() {
			if a.waitsForApproval() {
				continue // it waits for a person, not for a process
			}
			if a.processID != "" {
				if _, ok := r.k.Proc.Get(a.processID); ok {
					continue
				}
			}
			x := lost{id: a.id, loop: l.id, tool: a.tool, processID: a.processID, pid: a.pid, spawned: a.spawned, what: describeCall(a)}
			if processGone(x.pid, x.spawned) {
				gone = append(gone, x)
			} else {
				alive = append(alive, x)
			}
		}
	}
	r.mu.Unlock()
	r.interrupt(gone)
	if len(alive) == 0 {
		return
	}
	r.log.Info("processes of the daemon before still run; they are recorded as interrupted once gone", "count", len(alive))
	r.wg.Add(1)
	go func() { // owned by the runtime: ends with Stop
		defer r.wg.Done()
		t := time.NewTicker(interruptPoll)
		defer t.Stop()
		for len(alive) > 0 {
			select {
			case <-r.ctx.Done():
				return
			case <-t.C:
			}
			var now []lost
			left := alive[:0]
			for _, x := range alive {
				if processGone(x.pid, x.spawned) {
					now = append(now, x)
				} else {
					left = append(left, x)
				}
			}
			alive = left
			r.interrupt(now)
		}
	}()
}

// interrupt records xs as interrupted and tells the user, once a run loop.
func (r *Runtime) interrupt(xs []lost) {
	const why = "the daemon stopped while it ran"
	var loops []string
	byLoop := map[string][]lost{}
	cause := map[string]string{}
	for _, x := range xs {
		var ev *abi.Event
		if x.processID != "" {
			ev = r.emit(&abi.Event{Type: abi.SubjectProcessInterrupted, CorrelationID: x.loop, CausationID: x.id},
				abi.ProcessInterrupted{ProcessID: x.processID, Reason: why})
		} else {
			ev = r.emit(&abi.Event{Type: abi.SubjectToolResult, CorrelationID: x.loop, CausationID: x.id},
				abi.ToolResultEvent{ActionID: x.id, Tool: x.tool, Status: abi.StatusInterrupted, Error: why})
		}
		if _, ok := byLoop[x.loop]; !ok {
			loops = append(loops, x.loop)
			cause[x.loop] = ev.ID
		}
		byLoop[x.loop] = append(byLoop[x.loop], x)
	}
	for _, loop := range loops {
		r.emit(&abi.Event{Type: abi.SubjectAgentAction, CorrelationID: loop, CausationID: cause[loop]},
			abi.ActionEvent{Type: abi.ActionSay, ActionData: abi.ActionData{Text: interruptedText(byLoop[loop])}})
	}
}

// interruptedText tells the user what was interrupted: "`sleep 300` was
// running when Kairo stopped; it was ended. Say `again` to run it again."
func interruptedText(xs []lost) string {
	whats := make([]string, len(xs))
	for i, x := range xs {
		whats[i] = "`" + x.what + "`"
	}
	if len(xs) == 1 {
		return whats[0] + " was running when Kairo stopped; it was ended. Say `again` to run it again."
	}
	return strings.Join(whats[:len(whats)-1], ", ") + " and " + whats[len(whats)-1] +
		" were running when Kairo stopped; they were ended. Say `again` to run them again."
}

// processGone reports whether the process pid, spawned at spawned, is gone:
// no such process, a zombie, or another process that has its pid since.
// With no pid (never spawned, or a log from before pids were recorded)
// there is nothing to wait for.
func processGone(pid int, spawned time.Time) bool {
	if pid <= 0 {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}
	// The fields after the command, which is in parentheses and may
	// hold anything: state is the first, starttime the 20th.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 20 {
		return false
	}
	if f[0] == "Z" || f[0] == "X" {
		return true
	}
	if spawned.IsZero() {
		return false
	}
	started, ok := processStart(f[19])
	if !ok {
		return false
	}
	// Another process has the pid when it started well away from the
	// spawn the log records.
	const slack = 5 * time.Second
	return started.Before(spawned.Add(-slack)) || started.After(spawned.Add(slack))
}

// processStart turns /proc/PID/stat's starttime (clock ticks since boot)
// into a time.
func processStart(ticks string) (time.Time, bool) {
	n, err := strconv.ParseInt(ticks, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, false
	}
	for _, line := range strings.Split(string(stat), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			boot, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			const hz = 100 // USER_HZ, what /proc reports in on every Linux
			return time.Unix(boot, 0).Add(time.Duration(n) * time.Second / hz), true
		}
	}
	return time.Time{}, false
}

// describeCall is what a tool call ran, for the user: its command line, or
// the tool. Called under r.mu.
func describeCall(a *action) string {
	if c := commandOf(a); c != "" {
		return c
	}
	var ask abi.AgentAskArgs
	if a.tool == abi.ToolAgentAsk && json.Unmarshal([]byte(a.args), &ask) == nil && ask.Agent != "" {
		return "ask " + ask.Agent + ": " + ask.Text
	}
	return a.tool
}
