package kernel

import (
	"context"
	"errors"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
)

// subKey names a subscription: the session that opened it and the ID of the
// request that did. EVENT packets carry that request ID, so a client can
// route them before it has read the subscribe response.
type subKey struct {
	s  Session
	id uint64
}

func (k *Kernel) registerEvents() {
	k.Register(Method{Name: abi.MethodEventsPublish, Summary: "append an event to the bus; answered once durable", Handler: k.publish})
	k.Register(Method{Name: abi.MethodEventsSubscribe, Summary: "receive matching events as EVENT packets, from now or a sequence number", Handler: k.subscribe})
	k.Register(Method{Name: abi.MethodEventsUnsubscribe, Summary: "end a subscription", Handler: k.unsubscribe})
	k.Register(Method{Name: abi.MethodEventsReplay, Summary: "stored events by sequence, time and subject, as EVENT packets", Handler: k.replay})
}

func (k *Kernel) publish(ctx context.Context, c *Call) (any, error) {
	var p abi.PublishParams
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	if p.Event.Type == "" {
		return nil, abi.Errorf(abi.CodeInvalidParams, "event.type is empty: give the subject to publish on, e.g. \"app.order.created\"")
	}
	// Why: docs/RATIONALE.md#kernel-subjects.
	if bus.KernelOwned(p.Event.Type) {
		return nil, abi.Errorf(abi.CodePermissionDenied,
			"permission denied: %q is a kernel subject; only the kernel and the host publish kairo.process, intent, tool, agent, plugin, sandbox, approval, system, llm, mcp and memory events (a run loop is canceled with the intent.cancel method)", p.Event.Type)
	}
	// The source is who publishes, as the kernel knows it: a caller
	// cannot speak for another
	// (docs/RATIONALE.md#the-source-of-an-event-is-the-kernels-word).
	source := c.Session.Caller().Source()
	if p.Event.Source != "" && p.Event.Source != source {
		return nil, abi.Errorf(abi.CodeInvalidParams,
			"event.source %q: the kernel sets the source from who publishes (here %q); leave it empty", p.Event.Source, source)
	}
	p.Event.Source = source
	// An id the caller chose is stored in its scope, never as it is: the
	// kernel's own ids stay the kernel's (see [abi.ScopeEventID]).
	id, err := abi.ScopeEventID(source, p.Event.ID)
	if err != nil {
		return nil, err
	}
	p.Event.ID = id
	res, err := k.Bus.Publish(ctx, &p.Event)
	if err != nil {
		return nil, err
	}
	return abi.PublishResult{ID: p.Event.ID, Seq: res.Seq, Duplicate: res.Duplicate}, nil
}

func (k *Kernel) subscribe(ctx context.Context, c *Call) (any, error) {
	var p abi.SubscribeParams
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	sess, id := c.Session, c.RequestID
	key := subKey{sess, id}
	k.subsMu.Lock()
	_, taken := k.subs[key]
	k.subsMu.Unlock()
	if taken {
		return nil, abi.Errorf(abi.CodeInvalidParams, "request id %d already names an open subscription; use a fresh request id", id)
	}
	opts := bus.SubscribeConfig{FromSeq: p.FromSeq}
	if b, ok := sess.(subscriptionBudgeter); ok {
		opts.Budget = b.SubscriptionBudget()
	}
	sub, err := k.Bus.Subscribe(sess.Context(), p.Pattern, opts, func(evs []abi.Event) error {
		return sess.PushEvents(id, evs)
	})
	if errors.Is(err, bus.ErrTooManySubscriptions) {
		return nil, abi.Errorf(abi.CodeUnavailable, "subscribe: %v; end one with events.unsubscribe first", err)
	}
	if err != nil {
		return nil, err
	}
	k.subsMu.Lock()
	k.subs[key] = sub
	k.subsMu.Unlock()
	go func() { // owned by the subscription: returns when it ends
		<-sub.Done()
		k.subsMu.Lock()
		delete(k.subs, key)
		k.subsMu.Unlock()
		// Ended by the bus, not by its owner: say why, or the caller would
		// wait for events that never come.
		if err := sub.Err(); err != nil && sess.Context().Err() == nil {
			sess.EndStream(id, abi.Errorf(abi.CodeUnavailable, "subscription %d to %q ended: %v", id, sub.Pattern(), err))
		}
	}()
	return abi.SubscribeResult{Subscription: id}, nil
}

// subscriptionBudgeter is a Session whose subscriptions share a budget:
// how many it may open and how many bytes of events the bus may hold for
// them, so a client that subscribes and never reads costs a bounded
// amount. The IPC server's connections are; a subscription over its budget
// ends with a *bus.BehindError, which reaches the client by EndStream.
type subscriptionBudgeter interface {
	SubscriptionBudget() *bus.Budget
}

func (k *Kernel) unsubscribe(ctx context.Context, c *Call) (any, error) {
	var p abi.UnsubscribeParams
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	k.subsMu.Lock()
	sub, ok := k.subs[subKey{c.Session, p.Subscription}]
	k.subsMu.Unlock()
	if !ok {
		return nil, abi.Errorf(abi.CodeNotFound, "this session has no subscription %d", p.Subscription)
	}
	sub.Close()
	return struct{}{}, nil
}

// replay pushes the stored events in batches; the pushes precede the
// response on the connection, so the response marks the end.
func (k *Kernel) replay(ctx context.Context, c *Call) (any, error) {
	var p abi.ReplayParams
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	q := bus.Query{FromSeq: p.FromSeq, ToSeq: p.ToSeq, Since: p.Since, Until: p.Until, Limit: p.Limit}
	if p.Pattern != "" {
		pt, err := abi.CompilePattern(p.Pattern)
		if err != nil {
			return nil, err
		}
		q.Pattern = pt
	}
	const page = 512
	buf := make([]abi.Event, 0, page)
	var res abi.ReplayResult
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		err := c.Session.PushEvents(c.RequestID, buf)
		buf = buf[:0]
		return err
	}
	err := k.Bus.Replay(ctx, q, func(ev *abi.Event) error {
		buf = append(buf, *ev)
		res.Count++
		res.LastSeq = ev.Seq
		if len(buf) == page {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}
