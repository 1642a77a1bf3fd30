package agent

import (
	"fmt"
	"sync"
	"time"

	"github.com/kairo-os/kairo/abi"
)

// A policy that fails on every tick fails ten times a second, and each
// failure after the first is no news: a kairo.agent.error per tick filled
// the log with 36,000 events an hour and a waiting `kairo send` with the
// same line. A failure that repeats is reported at once, then again only
// after a pause that doubles from reportFirst up to reportMax, with the
// count of the failures kept quiet since; a tick the policy decides ends
// the streak.
const (
	reportFirst = time.Second
	reportMax   = 5 * time.Minute
)

// keyPolicy is the one streak of the policy's own failures, whatever
// their words: a plugin that traps, then is restarting, then stays
// stopped fails in other words each time.
const keyPolicy = "policy"

// streak is a failure that repeats: when it may be reported again, the
// pause after that, and the failures not reported since the last report.
type streak struct {
	next       time.Time
	wait       time.Duration
	suppressed int
}

// reporter bounds the reports of repeated failures, by key.
type reporter struct {
	mu      sync.Mutex
	streaks map[string]*streak
	// told are the user messages a failure was reported for: a message a
	// person sends while the policy keeps failing is told of it once,
	// whatever the pause.
	told map[string]bool
}

// maxKeys bounds what the reporter remembers; forgetting reports a
// failure once more.
const maxKeys = 1024

// allow reports whether a failure of key at now is to be reported, and
// how many failures of key were kept quiet since the last report. fresh
// reports it whatever the pause.
func (rp *reporter) allow(key string, now time.Time, fresh bool) (bool, int) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.streaks == nil || len(rp.streaks) > maxKeys {
		rp.streaks = map[string]*streak{}
	}
	s := rp.streaks[key]
	if s == nil {
		s = &streak{wait: reportFirst}
		rp.streaks[key] = s
	} else if now.Before(s.next) && !fresh {
		s.suppressed++
		return false, 0
	} else if !now.Before(s.next) {
		s.wait = min(2*s.wait, reportMax)
	}
	n := s.suppressed
	s.suppressed, s.next = 0, now.Add(s.wait)
	return true, n
}

// end ends the streak of key and returns the failures of it not reported.
func (rp *reporter) end(key string) (int, bool) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	s, ok := rp.streaks[key]
	if !ok {
		return 0, false
	}
	delete(rp.streaks, key)
	return s.suppressed, true
}

// fresh reports whether x holds a user message no failure was reported
// for yet, and marks them told.
func (rp *reporter) fresh(agent string, x []abi.Event) bool {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.told == nil || len(rp.told) > maxKeys {
		rp.told = map[string]bool{}
	}
	found := false
	for i := range x {
		if x[i].Type == abi.AgentMessageSubject(agent) && !rp.told[x[i].ID] {
			rp.told[x[i].ID], found = true, true
		}
	}
	return found
}

// report publishes a failure of a tick as kairo.agent.error, and logs it;
// a failure of the same words within its pause is only counted.
func (r *Runtime) report(tick uint64, msg string) { r.reportAs(tick, msg, msg, false) }

// reportPolicy reports a failure of the policy itself on the tick that
// observed x: at once when x holds a user message not yet told of one,
// else within the policy's streak.
func (r *Runtime) reportPolicy(tick uint64, x []abi.Event, msg string) {
	r.reportAs(tick, keyPolicy, msg, r.errs.fresh(r.cfg.Agent, x))
}

func (r *Runtime) reportAs(tick uint64, key, msg string, fresh bool) {
	ok, n := r.errs.allow(key, time.Now(), fresh)
	if !ok {
		return
	}
	if n > 0 {
		msg += fmt.Sprintf(" (and %d more times since the last report)", n)
	}
	r.log.Warn("tick", "tick", tick, "err", msg, "suppressed", n)
	r.publish(&abi.Event{Type: SubjectAgentError}, abi.AgentError{Tick: tick, Error: msg, Suppressed: n})
}

// policyDecided ends the policy's streak of failures, if it had one.
func (r *Runtime) policyDecided() {
	if n, ok := r.errs.end(keyPolicy); ok {
		r.log.Info("the policy decides again", "unreported failures", n)
	}
}
