package terminal

import (
	"strings"

	"github.com/kairo-os/kairo/abi"
)

// maxPending bounds a message continued over lines, and maxWriters the
// writers whose continued lines are kept at once.
const (
	maxPending = 64 << 10
	maxWriters = 16
)

// writers keeps each writer's continued lines apart, by the source of its
// input events: a line a skill leaves open (one ending in a backslash) must not
// become the start of the operator's next message, nor the other way
// round. The host names the writer of what the plugin publishes by the
// input it handles; this keeps the text of one writer's message its own.
type writers map[string]*lines

// of is the lines of source; past maxWriters, the others' unfinished
// messages are dropped.
func (w writers) of(source string) *lines {
	if l := w[source]; l != nil {
		return l
	}
	if len(w) >= maxWriters {
		clear(w)
	}
	l := &lines{}
	w[source] = l
	return l
}

// lines turns typed lines into user messages.
type lines struct {
	pending strings.Builder // the lines so far of a continued message
}

// add takes one line and returns the message it completes, if it does.
func (l *lines) add(t abi.TerminalInput) (abi.UserMessage, bool) {
	text := strings.TrimRight(t.Text, " \t\r\n")
	if cont, ok := strings.CutSuffix(text, `\`); ok {
		if l.pending.Len()+len(cont) < maxPending {
			l.pending.WriteString(cont)
			l.pending.WriteByte('\n')
		}
		return abi.UserMessage{}, false
	}
	if l.pending.Len() > 0 {
		text = l.pending.String() + text
		l.pending.Reset()
	}
	text = strings.TrimSpace(text)
	m := abi.UserMessage{MessageID: t.MessageID, Agent: t.Agent}
	if rest, ok := strings.CutPrefix(text, "@"); ok {
		id, body, _ := strings.Cut(rest, " ")
		if id != "" && !strings.ContainsAny(id, "\n\t") {
			m.RunLoopID, text = id, strings.TrimSpace(body)
		}
	}
	if text == "" {
		return abi.UserMessage{}, false
	}
	m.Text = text
	return m, true
}
