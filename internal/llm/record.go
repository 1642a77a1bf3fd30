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
		if n := size(res); n > maxRecorded {
			// The caller has the answer whole; the log keeps its start,
			// marked. Cut before redacting, which reads every byte.
			res = truncated(res, n)
		}
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

// maxRecorded bounds the record of one answer in the log: an answer up to
// [llm] max_response_bytes reaches the caller whole, but the log, which
// keeps everything for good, keeps the start of a larger one.
const maxRecorded = 1 << 20

// Truncated ends the content of a recorded answer that was cut to fit
// maxRecorded; a replay of it answers what was recorded.
const Truncated = "…[recording truncated]"

// truncated is res cut to fit maxRecorded: its content and each call's
// arguments clipped, the calls past the first maxRecordedCalls left out,
// and the content marked with Truncated and the answer's size.
func truncated(res abi.ChatResult, size int) abi.ChatResult {
	const maxRecordedCalls, maxArgs = 256, 1 << 10
	res.Message.Content = clipBytes(res.Message.Content, maxRecorded/2) +
		fmt.Sprintf("%s the answer was %d bytes, more than the %d the log keeps of one", Truncated, size, maxRecorded)
	calls := res.Message.ToolCalls
	if len(calls) > maxRecordedCalls {
		res.Message.Content += fmt.Sprintf("; %d of its %d tool calls are recorded", maxRecordedCalls, len(calls))
		calls = calls[:maxRecordedCalls]
	}
	res.Message.ToolCalls = make([]abi.ToolCall, len(calls))
	for i, c := range calls {
		c.ID, c.Name, c.Arguments = clipBytes(c.ID, 128), clipBytes(c.Name, 128), clipBytes(c.Arguments, maxArgs)
		res.Message.ToolCalls[i] = c
	}
	return res
}

// size is about what res takes in a record: its strings.
func size(res abi.ChatResult) int {
	n := len(res.Message.Content) + len(res.Model) + len(res.FinishReason)
	for _, c := range res.Message.ToolCalls {
		n += len(c.ID) + len(c.Name) + len(c.Arguments) + 16
	}
	return n
}

// clipBytes is s cut to n bytes at most.
func clipBytes(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

var llmEvents = abi.MustCompilePattern(abi.SubjectLLMAll)

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
