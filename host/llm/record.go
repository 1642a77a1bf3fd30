package llm

import (
	"context"
	"fmt"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/vmihailenco/msgpack/v5"
)

// Source is the source of the recorded kairo.llm.* events.
const Source = "host/llm"

// recordRequest publishes kairo.llm.request, durably, before the request is
// sent: a run interrupted while it waits for the model is then seen as such.
func (p *Provider) recordRequest(ctx context.Context, params abi.ChatParams, model string) (*abi.Event, error) {
	data, err := msgpack.Marshal(abi.LLMRequest{
		Params: p.redact.params(params), Model: model, Endpoint: p.endpoint, Stream: p.cfg.Stream,
	})
	if err != nil {
		return nil, fmt.Errorf("llm: encode the request's record: %w", err)
	}
	ev := &abi.Event{
		Type: abi.SubjectLLMRequest, Source: Source, Data: data,
		CorrelationID: params.CorrelationID, CausationID: params.CausationID,
	}
	if _, err := p.cfg.Bus.Publish(ctx, ev); err != nil {
		return nil, fmt.Errorf("llm: record the request: %w", err)
	}
	return ev, nil
}

// recordResponse publishes kairo.llm.response, caused by the request event.
func (p *Provider) recordResponse(ctx context.Context, req *abi.Event, res abi.ChatResult, err error, attempts int, d time.Duration) error {
	rec := abi.LLMResponse{Attempts: attempts, Duration: d}
	if err != nil {
		ae := ToABIError(err)
		rec.Error = &abi.Error{Code: ae.Code, Message: p.redact.text(ae.Message)}
	} else {
		r := p.redact.result(res)
		rec.Result = &r
	}
	data, merr := msgpack.Marshal(rec)
	if merr != nil {
		return fmt.Errorf("llm: encode the response's record: %w", merr)
	}
	ev := &abi.Event{
		Type: abi.SubjectLLMResponse, Source: Source, Data: data,
		CorrelationID: req.CorrelationID, CausationID: req.ID,
	}
	if _, err := p.cfg.Bus.Publish(ctx, ev); err != nil {
		return fmt.Errorf("llm: record the response: %w", err)
	}
	return nil
}

var llmEvents = bus.MustCompilePattern("kairo.llm.>")

// Recorded reads from b the recorded LLM exchanges of run loop runLoopID
// (its kairo.llm.request and kairo.llm.response events, in order): what
// NewReplay takes.
func Recorded(ctx context.Context, b *bus.Bus, runLoopID string) ([]abi.Event, error) {
	var evs []abi.Event
	err := b.Replay(ctx, bus.Query{Pattern: llmEvents}, func(ev *abi.Event) error {
		if ev.CorrelationID != runLoopID {
			return nil
		}
		// The store may reuse what ev points into once fn returns.
		var cp abi.Event
		if _, err := abi.DecodeEvent(abi.AppendEvent(nil, ev), &cp); err != nil {
			return err
		}
		cp.Seq = ev.Seq
		evs = append(evs, cp)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("llm: read the recording of run loop %q: %w", runLoopID, err)
	}
	return evs, nil
}
