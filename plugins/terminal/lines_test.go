package terminal

import (
	"testing"

	"github.com/kairo-os/kairo/abi"
)

func TestLines(t *testing.T) {
	var l lines
	steps := []struct {
		in       string
		want     string
		runLoop  string
		complete bool
	}{
		{"   ", "", "", false},
		{"run make \\", "", "", false},
		{"  test\\", "", "", false},
		{"now", "run make \n  test\nnow", "", true},
		{"@9f3a2b1c stop it", "stop it", "9f3a2b1c", true},
		{"@9f3a2b1c", "", "", false},
		{"progress  ", "progress", "", true},
	}
	for i, s := range steps {
		m, ok := l.add(abi.TerminalInput{Text: s.in, MessageID: "m"})
		if ok != s.complete || m.Text != s.want || m.RunLoopID != s.runLoop {
			t.Fatalf("step %d %q: got (%q, run %q, %v); want (%q, run %q, %v)", i, s.in, m.Text, m.RunLoopID, ok, s.want, s.runLoop, s.complete)
		}
		if ok && m.MessageID != "m" {
			t.Fatalf("step %d: messageId %q", i, m.MessageID)
		}
	}
}
