package terminal

import (
	"strings"

	"github.com/kairo-os/kairo/abi"
)

// maxPending bounds a message continued over lines.
const maxPending = 64 << 10

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
