package llm

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/kairo-os/kairo/abi"
	"github.com/vmihailenco/msgpack/v5"
)

// Replay is a Chatter that answers from a recording instead of a model: the
// n-th request of a run loop gets the response recorded for the n-th
// request of that run loop, marked Replayed. A request that differs from the
// recorded one (its messages or tools) is a *DivergenceError naming the
// first difference. A Replay records nothing and never touches the network.
type Replay struct {
	mu   sync.Mutex
	runs map[string]*recording // by run loop (correlation) id
}

// recording is one run loop's exchanges, in the order they were asked.
type recording struct {
	id        string
	exchanges []exchange
	next      int
}

type exchange struct {
	requestID string
	request   abi.LLMRequest
	response  *abi.LLMResponse // nil: the run ended before the answer
}

// NewReplay returns a Replay of the kairo.llm.request and kairo.llm.response
// events among events (others are ignored), such as Recorded returns. They
// may hold several run loops. A request is answered from the recording of
// its CorrelationID or, when it has none there and events hold exactly one
// run loop, from that one: a run replayed under a new id still finds its
// recording.
func NewReplay(events []abi.Event) (*Replay, error) {
	evs := slices.Clone(events)
	slices.SortStableFunc(evs, func(a, b abi.Event) int {
		if a.Seq == 0 || b.Seq == 0 {
			return 0 // not from a store: keep the order given
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	r := &Replay{runs: map[string]*recording{}}
	type place struct {
		rec *recording
		i   int
	}
	requests := map[string]place{} // by request event id
	for _, ev := range evs {
		switch ev.Type {
		case abi.SubjectLLMRequest:
			var req abi.LLMRequest
			if err := msgpack.Unmarshal(ev.Data, &req); err != nil {
				return nil, fmt.Errorf("llm: replay: event %s (seq %d): %s data: %w", ev.ID, ev.Seq, ev.Type, err)
			}
			rec := r.runs[ev.CorrelationID]
			if rec == nil {
				rec = &recording{id: ev.CorrelationID}
				r.runs[ev.CorrelationID] = rec
			}
			requests[ev.ID] = place{rec, len(rec.exchanges)}
			rec.exchanges = append(rec.exchanges, exchange{requestID: ev.ID, request: req})
		case abi.SubjectLLMResponse:
			at, ok := requests[ev.CausationID]
			if !ok {
				return nil, fmt.Errorf("llm: replay: event %s (seq %d): a response to request %q, which the events do not hold; give every kairo.llm event of the run loop", ev.ID, ev.Seq, ev.CausationID)
			}
			var res abi.LLMResponse
			if err := msgpack.Unmarshal(ev.Data, &res); err != nil {
				return nil, fmt.Errorf("llm: replay: event %s (seq %d): %s data: %w", ev.ID, ev.Seq, ev.Type, err)
			}
			at.rec.exchanges[at.i].response = &res
		}
	}
	return r, nil
}

// Chat answers p with the next recorded response of its run loop.
func (r *Replay) Chat(ctx context.Context, p abi.ChatParams) (abi.ChatResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.runs[p.CorrelationID]
	if rec == nil && len(r.runs) == 1 {
		for _, only := range r.runs {
			rec = only
		}
	}
	if rec == nil {
		return abi.ChatResult{}, abi.Errorf(abi.CodeNotFound, "%s: the replay holds no LLM exchanges of run loop %q (it holds %q)",
			abi.MethodLLMChat, p.CorrelationID, slices.Sorted(maps.Keys(r.runs)))
	}
	n := rec.next + 1
	if rec.next >= len(rec.exchanges) {
		return abi.ChatResult{}, &DivergenceError{RunLoopID: rec.id, Request: n,
			What: fmt.Sprintf("the run asks the model again, but the recording holds only %d requests", len(rec.exchanges))}
	}
	x := rec.exchanges[rec.next]
	// The recording was redacted: so is the request, with the patterns
	// (the key itself is unknown here; a redacted span matches anything).
	if what := diffParams(x.request.Params, newRedactor().params(p)); what != "" {
		return abi.ChatResult{}, &DivergenceError{RunLoopID: rec.id, Request: n, What: what}
	}
	rec.next++
	switch {
	case x.response == nil:
		return abi.ChatResult{}, abi.Errorf(abi.CodeUnavailable, "%s: request %d of run loop %q (event %s) has no recorded response: the run was interrupted while it waited for the model",
			abi.MethodLLMChat, n, rec.id, x.requestID)
	case x.response.Error != nil:
		e := *x.response.Error
		return abi.ChatResult{}, &e
	case x.response.Result == nil:
		return abi.ChatResult{}, abi.Errorf(abi.CodeInternal, "%s: the recorded response to request %d of run loop %q holds neither a result nor an error", abi.MethodLLMChat, n, rec.id)
	}
	res := *x.response.Result
	res.Message.ToolCalls = slices.Clone(res.Message.ToolCalls)
	res.Replayed = true
	return res, nil
}

// diffParams names the first difference between a recorded request and
// one made now, or returns "".
func diffParams(rec, now abi.ChatParams) string {
	for i := range min(len(rec.Messages), len(now.Messages)) {
		if what := diffMessage(rec.Messages[i], now.Messages[i]); what != "" {
			return fmt.Sprintf("messages[%d] (%s): %s", i, now.Messages[i].Role, what)
		}
	}
	if len(rec.Messages) != len(now.Messages) {
		return fmt.Sprintf("the run sends %d messages, the recording %d", len(now.Messages), len(rec.Messages))
	}
	for i := range min(len(rec.Tools), len(now.Tools)) {
		if what := diffTool(rec.Tools[i], now.Tools[i]); what != "" {
			return fmt.Sprintf("tools[%d] (%s): %s", i, now.Tools[i].Name, what)
		}
	}
	if len(rec.Tools) != len(now.Tools) {
		return fmt.Sprintf("the run offers %d tools %v, the recording %d %v", len(now.Tools), toolNames(now.Tools), len(rec.Tools), toolNames(rec.Tools))
	}
	return ""
}

func diffMessage(rec, now abi.ChatMessage) string {
	if what := diffText("role", rec.Role, now.Role); what != "" {
		return what
	}
	if what := diffText("content", rec.Content, now.Content); what != "" {
		return what
	}
	if what := diffText("name", rec.Name, now.Name); what != "" {
		return what
	}
	if what := diffText("toolCallId", rec.ToolCallID, now.ToolCallID); what != "" {
		return what
	}
	for i := range min(len(rec.ToolCalls), len(now.ToolCalls)) {
		r, n := rec.ToolCalls[i], now.ToolCalls[i]
		for _, f := range [][3]string{{"id", r.ID, n.ID}, {"name", r.Name, n.Name}, {"arguments", r.Arguments, n.Arguments}} {
			if what := diffText(f[0], f[1], f[2]); what != "" {
				return fmt.Sprintf("toolCalls[%d]: %s", i, what)
			}
		}
	}
	if len(rec.ToolCalls) != len(now.ToolCalls) {
		return fmt.Sprintf("%d tool calls, recorded %d", len(now.ToolCalls), len(rec.ToolCalls))
	}
	return ""
}

func diffTool(rec, now abi.Tool) string {
	if what := diffText("name", rec.Name, now.Name); what != "" {
		return what
	}
	if what := diffText("description", rec.Description, now.Description); what != "" {
		return what
	}
	// MsgPack gives numbers back in other Go types than they went in
	// with; JSON, with its sorted keys, compares what the endpoint sees.
	r, _ := json.Marshal(rec.Parameters)
	n, _ := json.Marshal(now.Parameters)
	return diffText("parameters", string(r), string(n))
}

func toolNames(ts []abi.Tool) []string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return names
}

// diffText compares a recorded text with one made now, a Redacted span of
// the recording standing for any non-empty text, and says how they differ.
func diffText(field, rec, now string) string {
	if matchRedacted(rec, now) {
		return ""
	}
	at := 0
	for at < len(rec) && at < len(now) && rec[at] == now[at] {
		at++
	}
	return fmt.Sprintf("%s differs from byte %d: %s, recorded %s", field, at, excerpt(now, at), excerpt(rec, at))
}

// excerpt quotes s around byte at, shortened.
func excerpt(s string, at int) string {
	const around = 30
	from, to := max(at-around, 0), min(at+around, len(s))
	// Keep to whole UTF-8 sequences.
	for from > 0 && from < len(s) && s[from]&0xC0 == 0x80 {
		from--
	}
	for to < len(s) && s[to]&0xC0 == 0x80 {
		to++
	}
	q := fmt.Sprintf("%q", s[from:to])
	if from > 0 {
		q = "…" + q
	}
	if to < len(s) {
		q += "…"
	}
	return q
}

// matchRedacted reports whether now fits rec, where each Redacted in rec
// stands for a non-empty text.
func matchRedacted(rec, now string) bool {
	if rec == now {
		return true
	}
	parts := strings.Split(rec, Redacted)
	if len(parts) == 1 {
		return false
	}
	first, last := parts[0], parts[len(parts)-1]
	if !strings.HasPrefix(now, first) || len(now) < len(first)+len(last) || !strings.HasSuffix(now, last) {
		return false
	}
	rest := now[len(first) : len(now)-len(last)]
	// Leftmost matches leave the most room for the parts after them.
	for _, part := range parts[1 : len(parts)-1] {
		if rest == "" {
			return false
		}
		i := strings.Index(rest[1:], part)
		if i < 0 {
			return false
		}
		rest = rest[1+i+len(part):]
	}
	return len(rest) > 0
}
