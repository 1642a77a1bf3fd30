package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/client"
)

// conversation follows the agent's answers to the messages one client
// sends, over one subscription.
type conversation struct {
	c   *client.Client
	sub *client.Subscription
	out *screen
}

// openConversation dials socket, or the usual socket when it is "".
func openConversation(ctx context.Context, out *screen, socket string) (*conversation, error) {
	var c *client.Client
	var err error
	if socket == "" {
		c, err = dial(ctx)
	} else {
		c, err = dialPath(ctx, socket)
	}
	if err != nil {
		return nil, err
	}
	sub, err := c.Subscribe(ctx, abi.SubjectAll, 0)
	if err != nil {
		c.Close()
		return nil, callError("subscribe", err)
	}
	return &conversation{c: c, sub: sub, out: out}, nil
}

func (v *conversation) close() { v.c.Close() }

// send publishes m as a user message and prints the agent's replies to
// it: every say and query of the run loop the message opened, until that
// run loop ends (with follow; else the first reply), or the first reply
// caused by the message when it opened none. A message that reached no
// agent (it named one that does not exist) prints the answer saying so
// and exits 1.
func (v *conversation) send(ctx context.Context, m abi.UserMessage, follow bool, wait time.Duration) error {
	id := abi.NewID()
	m.MessageID = id
	data, _ := msgpack.Marshal(m)
	res, err := v.c.Publish(ctx, abi.Event{Type: abi.SubjectUserMessage, Data: data})
	if err != nil {
		return callError("publish", err)
	}
	var routed, loop string
	replies := 0
	// The run loop is named a task at its first tool call: one the agent
	// only answered ("help") is a conversation, and says no more.
	var started *abi.Event // the run loop's start, printed as its line
	task := func() {
		if started != nil {
			v.out.event(started, "· task "+termLine(shortID(loop)))
			started = nil
		}
	}
	deadline := time.Now().Add(wait)
	for {
		nctx, cancel := ctx, context.CancelFunc(func() {})
		if replies == 0 {
			// The wait bounds the first reply only; a task then runs as
			// long as it runs.
			nctx, cancel = context.WithDeadline(ctx, deadline)
		}
		ev, err := v.sub.Next(nctx)
		timedOut := nctx.Err() != nil && ctx.Err() == nil
		cancel()
		switch {
		case timedOut:
			return fmt.Errorf("no reply from the agent within %v; is it running? `kairo plugins` shows its policy, `kairo events tail` what happens", wait)
		case ctx.Err() != nil:
			return nil
		case err != nil:
			if errors.Is(err, client.ErrClosed) {
				return errors.New("the kernel closed the connection (it stopped?)")
			}
			return callError("follow", err)
		}
		if ev.Seq <= res.Seq {
			continue
		}
		switch {
		case abi.IsAgentMessageSubject(ev.Type) && ev.CausationID == res.ID:
			routed = ev.ID
		case ev.Type == abi.SubjectAgentAction && ev.CausationID == res.ID:
			// Caused by the message itself, not by its routed copy: it
			// named no agent that exists, and this says so.
			var d abi.ActionEvent
			if msgpack.Unmarshal(ev.Data, &d) == nil && d.Type == abi.ActionSay {
				v.out.event(ev, termText(d.Text))
				return exitCode(1)
			}
		case ev.Type == abi.SubjectIntentStarted:
			var d abi.IntentStarted
			if msgpack.Unmarshal(ev.Data, &d) == nil && d.MessageID == id {
				loop, started = d.RunLoopID, ev
			}
		case ev.Type == abi.SubjectAgentAction && (ev.CausationID == routed && routed != "" || ev.CorrelationID == loop && loop != ""):
			var d abi.ActionEvent
			if msgpack.Unmarshal(ev.Data, &d) != nil {
				continue
			}
			switch d.Type {
			case abi.ActionSay, abi.ActionQuery:
				// A question waits for the user's next message, and one
				// not followed is left open: either is named.
				stop := loop == "" || !follow || d.Type == abi.ActionQuery
				if stop {
					task()
				}
				v.out.event(ev, termText(d.Text))
				replies++
				if stop {
					return nil
				}
			case abi.ActionToolCall:
				task()
				v.out.event(ev, "· "+termLine(d.Tool)+" "+termLine(d.Args))
				if !follow {
					return nil
				}
			}
		case ev.Type == abi.SubjectProcessProgress && ev.CorrelationID == loop && loop != "":
			v.out.progress(ev, "· ")
		case consentEvent(ev.Type) && ev.CorrelationID == loop && loop != "":
			if line := chatLine(ev, false); line != "" {
				v.out.event(ev, line)
			}
		case ev.Type == abi.SubjectIntentEnded && ev.CorrelationID == loop && loop != "":
			return nil
		case ev.Type == abi.SubjectAgentError && ev.CausationID == "" && replies == 0 && routed != "":
			var d abi.AgentError
			if msgpack.Unmarshal(ev.Data, &d) == nil {
				v.out.event(ev, "· the agent: "+termText(d.Error))
			}
		}
	}
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[len(id)-8:]
	}
	return id
}

func runSend(ctx context.Context, args []string) error {
	f := newFlags("send", `kairo send [--agent ID] [--run ID] [--no-follow] [--wait DURATION] [--json] "TEXT"`, `
Send TEXT to the agent of the running daemon as the user, and print its
replies: for a message that starts a task, every reply until the task ends
(Ctrl-C stops following; the task goes on); otherwise the first reply.
With --agent the message goes to that agent (kairo agents lists them);
without, to the one TEXT starts with ("@ops run make" or "ops: run make"),
else to the default agent. A message to an agent that does not exist
reaches none: the answer says which there are, and kairo send exits 1.
With --run the message goes into that task (kairo runs lists them), to
the agent whose task it is; one that has ended answers from its record,
and nothing new is started.

On a terminal a task's progress is one line, redrawn; piped, a line per
report. With --json, each event shown is printed as one JSON object.`)
	agent := f.String("agent", "", "send to the agent `ID`")
	run := f.String("run", "", "send into the run loop `ID`")
	noFollow := f.Bool("no-follow", false, "return after the first reply, even for a new task")
	wait := f.Duration("wait", 30*time.Second, "give up when no reply comes within `DURATION`")
	asJSON := f.Bool("json", false, "print each event shown as one JSON object")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if strings.TrimSpace(pos[0]) == "" {
		return &usageError{msg: "the message is empty", synopsis: f.synopsis}
	}
	out := stdoutScreen()
	if *asJSON {
		out.mode = progressJSON
	}
	v, err := openConversation(ctx, out, "")
	if err != nil {
		return err
	}
	defer v.close()
	m := abi.UserMessage{Text: pos[0], Agent: *agent, RunLoopID: *run}
	if m.Agent == "" && m.RunLoopID != "" {
		m.Agent = v.runAgent(ctx, m.RunLoopID)
	}
	return v.send(ctx, m, !*noFollow, *wait)
}

// runAgent is the agent whose run loop id names (whole, or its end), ""
// when none or several do: the router routes a message by agent, so one
// into a task of an agent other than the default must name its agent.
func (v *conversation) runAgent(ctx context.Context, id string) string {
	var res abi.RunsResult
	if err := v.c.Call(ctx, abi.MethodAgentRuns, abi.RunsParams{ID: id, Limit: 2, All: true}, &res); err != nil || len(res.Runs) != 1 {
		return ""
	}
	return res.Runs[0].Agent
}

func runChat(ctx context.Context, args []string) error {
	f := newFlags("chat", "kairo chat [--agent ID]", `
Talk to the agent of the running daemon: each line you type is a message;
its replies print as they come. Ctrl-D or Ctrl-C ends the chat; tasks go
on running. Type "help" for what the agent understands.

With several agents (kairo agents), a line goes to the default agent, or
with --agent to that one; a line that starts with "@ID " goes to agent
ID instead, and each reply is headed by the agent that gives it.`)
	agent := f.String("agent", "", "send each line to the agent `ID`")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	return chat(ctx, os.Stdin, stdoutScreen(), "", *agent)
}

// stdoutScreen is stdout as a screen: progress redrawn in place on a
// terminal, plain lines when piped.
func stdoutScreen() *screen {
	fd := int(os.Stdout.Fd())
	if !isTerminal(fd) {
		return newScreen(os.Stdout, progressPlain, 0)
	}
	cols, _, _ := termSize(fd)
	return newScreen(os.Stdout, progressTerminal, int(cols))
}

// chat reads lines from in and sends each as a message — to agent, or
// the router's choice when it is "" — while every reply of the agents —
// to any message, in any task, as it comes — prints to out, with a line
// for each process a task starts and its progress. A message another
// client sent is shown before the replies to it, so no reply answers a
// question the reader never saw.
func chat(ctx context.Context, in io.Reader, out *screen, socket, agent string) error {
	v, err := openConversation(ctx, out, socket)
	if err != nil {
		return err
	}
	defer v.close()
	to, err := newAddresser(ctx, v, agent)
	if err != nil {
		return err
	}
	// With several agents each reply is headed by the agent that gives it.
	named := len(to.agents) > 1
	// The lines go to the terminal input plugin, which makes them user
	// messages; without it running, they are sent as user messages here.
	viaPlugin := terminalPlugin(ctx, v)
	if !viaPlugin {
		out.line("kairo: the terminal plugin does not run (kairo plugins): lines go to the agent as they are")
	}
	// The message ids typed here, until their user message is seen.
	var sent sync.Map
	go func() { // ends when the connection closes (v.close)
		// An error the agent repeats each tick shows once a minute.
		var lastErr string
		var lastErrAt time.Time
		for {
			ev, err := v.sub.Next(context.Background())
			if err != nil {
				return
			}
			switch {
			case ev.Type == abi.SubjectUserMessage:
				var m abi.UserMessage
				if msgpack.Unmarshal(ev.Data, &m) != nil {
					continue
				}
				if _, mine := sent.LoadAndDelete(m.MessageID); !mine {
					out.line(otherMessage(ev.Source, m.Text))
				}
			case ev.Type == abi.SubjectProcessProgress:
				if ev.CorrelationID != "" {
					out.progress(ev, "· ["+termLine(shortID(ev.CorrelationID))+"] ")
				}
			default:
				line := chatLine(ev, named)
				if line == "" {
					continue
				}
				if ev.Type == abi.SubjectAgentError {
					if line == lastErr && ev.Time.Sub(lastErrAt) < repeatWindow {
						continue
					}
					lastErr, lastErrAt = line, ev.Time
				}
				out.line(line)
			}
		}
	}()
	lines := make(chan string)
	go func() { // ends with in: Ctrl-D, or the process
		defer close(lines)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	out.setPrompt("you> ")
	for {
		select {
		case <-ctx.Done():
			out.end()
			return nil
		case line, ok := <-lines:
			if !ok {
				out.end()
				return nil
			}
			out.moved()
			if strings.TrimSpace(line) == "" {
				out.setPrompt("you> ")
				continue
			}
			id := abi.NewID()
			sent.Store(id, true)
			agent, text := to.address(ctx, line)
			ev := abi.Event{Type: abi.SubjectTerminalInput}
			ev.Data, _ = msgpack.Marshal(abi.TerminalInput{Text: text, MessageID: id, Agent: agent})
			if !viaPlugin {
				ev.Type = abi.SubjectUserMessage
				ev.Data, _ = msgpack.Marshal(abi.UserMessage{Text: text, MessageID: id, Agent: agent})
			}
			if _, err := v.c.Publish(ctx, ev); err != nil {
				sent.Delete(id)
				out.line("kairo: " + termText(callError("send", err).Error()))
			}
		}
	}
}

// addresser is where the chat sends each line: to the chat's agent
// (--agent; "" lets the router choose), or to the agent the line starts
// with ("@ops run make"). The terminal plugin reads "@ID" as the address
// of a task, so a line for an agent goes with its address taken off and
// the agent named; a line for a task names the agent whose task it is.
type addresser struct {
	v      *conversation
	agents []string // the daemon's agents (agent.list)
	agent  string
	// A line that ends with a backslash continues on the next, and the
	// message goes where its first line said: next, while continued.
	continued bool
	next      string
}

// newAddresser is the addresser of a chat with agent, which must be one
// of the daemon's agents when it is not "". A chat with no agent named
// goes on without the list when it cannot be had: its lines then go as
// they are typed.
func newAddresser(ctx context.Context, v *conversation, agent string) (*addresser, error) {
	a := &addresser{v: v, agent: agent}
	var res abi.AgentsResult
	if err := v.c.Call(ctx, abi.MethodAgentList, nil, &res); err != nil && agent != "" {
		return nil, callError("kairo chat --agent: list the agents", err)
	}
	for _, info := range res.Agents {
		a.agents = append(a.agents, info.ID)
	}
	if agent != "" && !slices.Contains(a.agents, agent) {
		return nil, fmt.Errorf("there is no agent %q; the agents are %s (kairo agents describes them)", agent, strings.Join(a.agents, ", "))
	}
	return a, nil
}

// address is the agent line goes to ("" for the router's choice) and the
// text to send.
func (a *addresser) address(ctx context.Context, line string) (agent, text string) {
	agent, text = a.agent, line
	trimmed := strings.TrimSpace(line)
	switch rest, ok := strings.CutPrefix(trimmed, "@"); {
	case a.continued:
		agent = a.next
	case ok:
		name, body, _ := strings.Cut(rest, " ")
		if id := strings.ToLower(strings.TrimRight(name, ":,")); slices.Contains(a.agents, id) {
			agent = id
			if body = strings.TrimSpace(body); body != "" {
				text = body
			}
		} else if owner := a.v.runAgent(ctx, name); owner != "" {
			agent = owner
		}
	}
	a.continued, a.next = strings.HasSuffix(trimmed, `\`), agent
	return agent, text
}

// otherMessage is how the chat shows a user message it did not send: who
// sent it, then the text, as "you> " would have shown it typed here.
func otherMessage(source, text string) string {
	kind, name, _ := strings.Cut(source, "/")
	switch {
	case kind == abi.PrincipalOperator:
		return "(from another client) you> " + termText(text)
	case source == "plugin/terminal":
		return "(from another chat) you> " + termText(text)
	case kind == "plugin":
		return "(from plugin " + termLine(name) + ") " + termText(text)
	}
	return "(from " + termLine(source) + ") " + termText(text)
}

// terminalPlugin reports whether the terminal input plugin runs.
func terminalPlugin(ctx context.Context, v *conversation) bool {
	var res abi.PluginsListResult
	if err := v.c.Call(ctx, abi.MethodPluginsList, nil, &res); err != nil {
		return false
	}
	for _, p := range res.Plugins {
		if p.Name == "terminal" && p.State == abi.PluginRunning {
			return true
		}
	}
	return false
}

// chatLine is what the chat shows of an event, or "": every string in it
// that the agent, a tool or a process wrote is escaped for the terminal.
// With named, an answer is headed by the agent that gives it ("ops> ")
// rather than "agent> ".
func chatLine(ev *abi.Event, named bool) string {
	switch ev.Type {
	case abi.SubjectAgentAction:
		var d abi.ActionEvent
		if msgpack.Unmarshal(ev.Data, &d) != nil {
			return ""
		}
		who := "agent"
		if id, ok := strings.CutPrefix(ev.Source, abi.PrincipalAgent+"/"); ok && named {
			who = termLine(id)
		}
		switch d.Type {
		case abi.ActionSay:
			return who + "> " + termText(d.Text)
		case abi.ActionQuery:
			return who + "? " + termText(d.Text)
		case abi.ActionToolCall:
			return fmt.Sprintf("· [%s] %s %s", termLine(shortID(ev.CorrelationID)), termLine(d.Tool), termLine(d.Args))
		}
	case abi.SubjectProcessProgress:
		if r, ok := readProgress(ev); ok && ev.CorrelationID != "" {
			return "· [" + termLine(shortID(ev.CorrelationID)) + "] " + r.plain()
		}
	case abi.SubjectAgentError:
		var d abi.AgentError
		if msgpack.Unmarshal(ev.Data, &d) == nil {
			return "· the agent: " + termText(d.Error)
		}
	case abi.SubjectApprovalRequested:
		var d abi.ApprovalRequest
		if msgpack.Unmarshal(ev.Data, &d) == nil {
			return fmt.Sprintf("approve? [%s] %s — %s %s — answer yes or no (or kairo approve %s)",
				termLine(shortID(ev.CorrelationID)), termText(d.Reason), termLine(d.Tool), termLine(d.Args), termLine(d.ID))
		}
	case abi.SubjectApprovalDecided:
		var d abi.ApprovalDecision
		if msgpack.Unmarshal(ev.Data, &d) == nil {
			what := "denied"
			if d.Approved {
				what = "approved"
			}
			line := fmt.Sprintf("· [%s] %s by %s", termLine(shortID(ev.CorrelationID)), what, termLine(d.By))
			if d.Reason != "" {
				line += ": " + termText(d.Reason)
			}
			return line
		}
	case abi.SubjectSandboxDenied:
		var d abi.SandboxDenied
		if msgpack.Unmarshal(ev.Data, &d) == nil && ev.CorrelationID != "" {
			return "· [" + termLine(shortID(ev.CorrelationID)) + "] " + denialLine(d)
		}
	}
	return ""
}

// consentEvent reports whether subject is an approval's or a refusal's:
// what a chat shows of a task besides its actions.
func consentEvent(subject string) bool {
	return abi.SubjectIn(subject, abi.SubjectApprovalAll) || subject == abi.SubjectSandboxDenied
}
