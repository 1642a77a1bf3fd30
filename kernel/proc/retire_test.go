package proc

import (
	"strconv"
	"testing"
	"time"
)

// The manager keeps the last maxEnded ended sessions, not every session it
// ever ran: the oldest ended are forgotten, by id and by pid. A running
// session is never forgotten, however many end after it.
func TestEndedSessionsBounded(t *testing.T) {
	n := maxEnded
	t.Cleanup(func() { maxEnded = n }) // after the env's: its sessions retire
	maxEnded = 3
	e := newEnv(t, Config{})
	running := e.spawn(Spec{Argv: []string{"sleep", "30"}})
	var ended []*Session
	for range 5 {
		s := e.spawn(Spec{Argv: []string{"true"}})
		wait(t, s)
		ended = append(ended, s)
	}
	// Retired just after Wait returns: give the last one a moment.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, kept := e.m.Get(ended[1].ID())
		if !kept || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i, s := range ended {
		_, ok := e.m.Get(s.ID())
		if want := i >= 2; ok != want {
			t.Errorf("ended session %d (%s): kept %v, want %v", i, s.ID(), ok, want)
		}
		if got := e.m.TreeOfPID(s.Info().PID) != nil; got != (i >= 2) {
			t.Errorf("ended session %d: found by pid %v, want %v", i, got, i >= 2)
		}
	}
	if _, ok := e.m.Get(running.ID()); !ok {
		t.Error("the running session was forgotten")
	}
	if n := len(e.m.List()); n != 4 {
		t.Errorf("List has %d sessions; want the running one and the last 3 ended", n)
	}
}

// A manager over a log that has events numbers its processes past them:
// a process of the daemon before (whose events are in the log) and one
// of this daemon never share an id. The control: over an empty log the
// first process is p1.
func TestProcessIDsNotReused(t *testing.T) {
	e := newEnv(t, Config{})
	first := e.spawn(Spec{Argv: []string{"true"}})
	wait(t, first)
	if first.ID() != "p1" {
		t.Fatalf("the first process over an empty log is %s; want p1", first.ID())
	}
	e.event("kairo.process.exited", first.ID())
	last := e.bus.LastSeq()
	again := NewManager(e.bus, Config{}) // a restart over the same log
	defer again.Close()
	s, err := again.Spawn(Spec{Argv: []string{"true"}}, "owner")
	if err != nil {
		t.Fatal(err)
	}
	wait(t, s)
	if want := "p" + strconv.FormatUint(last+1, 10); s.ID() != want {
		t.Fatalf("after a restart the first process is %s; want %s, past the log's %d events", s.ID(), want, last)
	}
}
