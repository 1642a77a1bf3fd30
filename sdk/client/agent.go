package client

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/kairo-os/kairo/abi"
	"github.com/vmihailenco/msgpack/v5"
)

// DecodeData decodes an event's data into T, the abi type of its subject
// ([abi.ProcessExitedEvent] for [abi.SubjectProcessExited], and so on):
// what a program does with the events of a [Subscription] or a replay.
func DecodeData[T any](ev *abi.Event) (T, error) {
	var v T
	if err := msgpack.Unmarshal(ev.Data, &v); err != nil {
		return v, fmt.Errorf("%s (seq %d): decode its data into %T: %w", ev.Type, ev.Seq, v, err)
	}
	return v, nil
}

// PublishData publishes an event of type subject whose data is v, encoded
// as the kernel and every consumer decode it; see [Client.Publish].
func (c *Client) PublishData(ctx context.Context, subject string, v any) (abi.PublishResult, error) {
	data, err := msgpack.Marshal(v)
	if err != nil {
		return abi.PublishResult{}, fmt.Errorf("%s: encode its data: %w", subject, err)
	}
	return c.Publish(ctx, abi.Event{Type: subject, Data: data})
}

// Conversation is a message sent to the agent ([Client.Send]) and the
// agent's replies to it, as `kairo send` prints them. It holds a
// subscription of its own: [Conversation.Close] it.
type Conversation struct {
	sub     *Subscription
	msg     abi.UserMessage
	stored  abi.PublishResult
	routed  string // the id of the message as the runtime routed it to an agent
	runLoop string // the run loop the message opened or went into, once known
	ended   bool
}

// Reply is one step of the agent's answer to a message.
type Reply struct {
	// Event is the event the reply is: a kairo.agent.action (a say, a
	// query or a tool call), a kairo.agent.error or a kairo.intent.ended.
	Event *abi.Event
	// RunLoopID is the run loop (the task) the message opened, or the
	// one the reply names.
	RunLoopID string
	// Action is the agent's action, for a kairo.agent.action: Type
	// [abi.ActionSay] or [abi.ActionQuery] with its Text, or a tool call
	// ([abi.ActionToolCall]) with its Tool and Args.
	Action *abi.ActionEvent
	// Error is a failure of the agent while it answered the message.
	Error *abi.AgentError
	// Ended is the end of the task the message opened.
	Ended *abi.IntentEnded
	// Last is set on the reply after which none follows for this message:
	// the end of its task; its answer when it opened no task; a question,
	// which waits for the user's next message.
	Last bool
	// NoAgent is set on the answer to a message that named an agent that
	// does not exist (UserMessage.Agent, or "@ID" in its text): it reached
	// no agent, and the default agent's say, the only reply, says which
	// agents there are.
	NoAgent bool
}

// Send sends a message to the agent as the user (kairo.user.message), as
// `kairo send` does, and returns the conversation that follows it:
// [Conversation.Next] returns each reply. m.Text is the message;
// m.Agent sends it to that agent (empty: the one its text names, as
// "@ops run make", else the default agent); m.RunLoopID sends it into that
// task of that agent (a task of another agent than the default needs
// m.Agent too: the router goes by agent, not by task); an empty
// m.MessageID gets a new id.
// Bound the wait for the first reply with ctx: an agent whose policy does
// not answer leaves Next waiting.
func (c *Client) Send(ctx context.Context, m abi.UserMessage) (*Conversation, error) {
	if m.MessageID == "" {
		m.MessageID = abi.NewID()
	}
	// Subscribed first, so that no reply comes before it listens.
	sub, err := c.Subscribe(ctx, abi.SubjectAll, 0)
	if err != nil {
		return nil, err
	}
	res, err := c.PublishData(ctx, abi.SubjectUserMessage, m)
	if err != nil {
		sub.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return &Conversation{sub: sub, msg: m, stored: res}, nil
}

// Message is the message as it was sent, with its MessageID.
func (v *Conversation) Message() abi.UserMessage { return v.msg }

// Stored is where the message was stored: its event's id and sequence number.
func (v *Conversation) Stored() abi.PublishResult { return v.stored }

// RunLoopID is the run loop (task) the message opened, once the agent
// opened it; "" before, and for a message that opened none.
func (v *Conversation) RunLoopID() string { return v.runLoop }

// Next returns the agent's next reply to the message, waiting for it; after
// the reply marked Last it returns [io.EOF].
func (v *Conversation) Next(ctx context.Context) (Reply, error) {
	if v.ended {
		return Reply{}, io.EOF
	}
	for {
		ev, err := v.sub.Next(ctx)
		if err != nil {
			return Reply{}, err
		}
		if ev.Seq <= v.stored.Seq {
			continue
		}
		r, ok := v.step(ev)
		if !ok {
			continue
		}
		r.Event, r.RunLoopID = ev, v.runLoop
		if r.RunLoopID == "" && r.Action != nil {
			r.RunLoopID = r.Action.RunLoopID
		}
		v.ended = r.Last
		return r, nil
	}
}

// step follows the message through ev, and returns the reply ev is, if it
// is one.
func (v *Conversation) step(ev *abi.Event) (Reply, bool) {
	mine := func() bool { return ev.CorrelationID == v.runLoop && v.runLoop != "" }
	switch {
	case abi.IsAgentMessageSubject(ev.Type) && ev.CausationID == v.stored.ID:
		v.routed = ev.ID
	case ev.Type == abi.SubjectAgentAction && ev.CausationID == v.stored.ID:
		// Caused by the message itself, not by its routed copy: the
		// message named no agent that exists, and this says so.
		if d, err := DecodeData[abi.ActionEvent](ev); err == nil && d.Type == abi.ActionSay {
			return Reply{Action: &d, Last: true, NoAgent: true}, true
		}
	case ev.Type == abi.SubjectIntentStarted:
		if d, err := DecodeData[abi.IntentStarted](ev); err == nil && d.MessageID == v.msg.MessageID {
			v.runLoop = d.RunLoopID
		}
	case ev.Type == abi.SubjectAgentAction && (ev.CausationID == v.routed && v.routed != "" || mine()):
		d, err := DecodeData[abi.ActionEvent](ev)
		if err != nil {
			return Reply{}, false
		}
		switch d.Type {
		case abi.ActionSay, abi.ActionQuery:
			// A message that opened no task is answered once; a question
			// waits for the user's next message.
			return Reply{Action: &d, Last: d.Type == abi.ActionQuery || v.runLoop == ""}, true
		case abi.ActionToolCall:
			return Reply{Action: &d}, true
		}
	case ev.Type == abi.SubjectIntentEnded && mine():
		d, err := DecodeData[abi.IntentEnded](ev)
		if err != nil {
			return Reply{}, false
		}
		return Reply{Ended: &d, Last: true}, true
	case ev.Type == abi.SubjectAgentError && ev.CausationID == "" && v.routed != "":
		if d, err := DecodeData[abi.AgentError](ev); err == nil {
			return Reply{Error: &d}, true
		}
	}
	return Reply{}, false
}

// Close stops following the conversation; the task, if any, goes on.
func (v *Conversation) Close(ctx context.Context) error {
	err := v.sub.Close(ctx)
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}
