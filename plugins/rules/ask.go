package rules

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// Asking another agent: "ask ops: run the build" or "ask ops to run the
// build" calls the tool agent.ask, and its result is said in the same run
// loop. The rule policy does not check the agent's id: the runtime knows
// the agents and refuses an unknown one with a failed result, which is
// then said like any other.

// reAsk takes "ask ID: TEXT" and "ask ID to TEXT"; the text may be left
// out, and then the policy asks for it. Only "ask" and "to" ignore case:
// an agent's id is taken as written.
var reAsk = lazyRE(`^(?i:ask)(?:\s+([a-z0-9_-]+)(?:\s*:\s*|\s+(?i:to)(?:\s+|$)|\s*$)((?s:.*)))?$`)

// askWhatSuffix ends the question "Ask ops what?"; the answer, sent into
// the question's run loop, is the text to ask.
const askWhatSuffix = " what? For example: ask "

// reAskedWhat finds the agent in that question.
var reAskedWhat = lazyRE(`^Ask ([a-z0-9_-]+)` + regexp.QuoteMeta(askWhatSuffix))

// onAsk answers an ask command: the tool call, or a question for what the
// command left out. raw is the message as typed, so the text keeps its
// punctuation.
func onAsk(corr, raw string) abi.Action {
	sub := reAsk().FindStringSubmatch(strings.TrimSpace(raw))
	if sub == nil {
		sub = reAsk().FindStringSubmatch(normalize(raw))
	}
	agent, text := sub[1], strings.TrimSpace(sub[2])
	switch {
	case agent == "":
		return query(corr, "Ask which agent, and what? For example: ask ops: run make test")
	case text == "":
		return query(corr, "Ask "+agent+askWhatSuffix+agent+": run make test")
	}
	return ask(corr, agent, text)
}

// askedWhat is the agent a run loop's last action asked "what?" for, or
// "".
func askedWhat(l *abi.RunLoopView) string {
	n := len(l.Actions)
	if n == 0 || l.Actions[n-1].Type != abi.ActionQuery {
		return ""
	}
	if sub := reAskedWhat().FindStringSubmatch(l.Actions[n-1].Text); sub != nil {
		return sub[1]
	}
	return ""
}

// ask is the tool call that asks agent to do text.
func ask(corr, agent, text string) abi.Action {
	args, _ := json.Marshal(abi.AgentAskArgs{Agent: agent, Text: text})
	return abi.Action{Type: abi.ActionToolCall, CorrelationID: corr, Data: data(abi.ActionData{Tool: abi.ToolAgentAsk, Args: string(args)})}
}

// onAskResult says what became of an ask, closing its run loop: the
// agent's answer, quoted as it came (the policy never reads it as a
// command), or why it could not answer. A canceled ask is said only while
// its run loop is open: a cancel of the run loop itself ends it, and said
// why.
func onAskResult(corr string, r *abi.ToolResultEvent, loops []abi.RunLoopView) (abi.Action, bool) {
	agent := askedAgent(r.ActionID, loopByID(corr, loops))
	switch r.Status {
	case abi.StatusDone:
		return say(corr, agent+": "+answerText(r.Result), true), true
	case abi.StatusCanceled:
		if loopByID(corr, loops) == nil {
			return abi.Action{}, false
		}
		fallthrough
	case abi.StatusFailed:
		return say(corr, agent+" could not answer: "+orUnknown(r.Error), true), true
	}
	return abi.Action{}, false
}

// askedAgent is the agent the ask action id asked, from its args in its
// run loop; "the agent" when the run loop does not show it.
func askedAgent(id string, l *abi.RunLoopView) string {
	if l != nil {
		for _, a := range l.Actions {
			var args abi.AgentAskArgs
			if a.ID == id && json.Unmarshal([]byte(a.Args), &args) == nil && args.Agent != "" {
				return args.Agent
			}
		}
	}
	return "the agent"
}

// answerText is an ask's result as text. The answer is a string, which
// may itself be a JSON string (then it is unquoted) or plain text; an
// answer too large for the event is a stored reference, shown by its
// first bytes.
func answerText(raw msgpack.RawMessage) string {
	var v any
	if len(raw) == 0 || msgpack.Unmarshal(raw, &v) != nil {
		return "(no answer)"
	}
	switch v := v.(type) {
	case string:
		return unquote(v)
	case []byte:
		return unquote(string(v))
	}
	var ref abi.ToolResultRef
	if msgpack.Unmarshal(raw, &ref) == nil && ref.Ref != "" {
		return fmt.Sprintf("%s… (the whole answer, %d bytes, is stored as %s)", ref.Preview, ref.Size, ref.Ref)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// unquote is s decoded when it is a JSON string, else s.
func unquote(s string) string {
	var text string
	if json.Unmarshal([]byte(s), &text) == nil {
		s = text
	}
	if strings.TrimSpace(s) == "" {
		return "(no answer)"
	}
	return s
}

func orUnknown(why string) string {
	if why == "" {
		return "it did not say why"
	}
	return why
}

func query(corr, text string) abi.Action {
	return abi.Action{Type: abi.ActionQuery, CorrelationID: corr, Data: data(abi.ActionData{Text: text})}
}
