package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/kairo-os/kairo/abi"
	openai "github.com/sashabaranov/go-openai"
)

// request turns p into go-openai's request, or says what is wrong with it.
func (p *Provider) request(params abi.ChatParams) (openai.ChatCompletionRequest, error) {
	invalid := func(format string, args ...any) error {
		return abi.Errorf(abi.CodeInvalidParams, "%s: %s", abi.MethodLLMChat, fmt.Sprintf(format, args...))
	}
	if len(params.Messages) == 0 {
		return openai.ChatCompletionRequest{}, invalid("messages is empty: give the conversation, at least one user message")
	}
	req := openai.ChatCompletionRequest{Model: params.Model, Stream: p.cfg.Stream}
	if req.Model == "" {
		req.Model = p.cfg.Model
	}
	for i, m := range params.Messages {
		if m.Role == "" {
			return req, invalid("messages[%d] has no role: want %q, %q, %q or %q", i, abi.RoleSystem, abi.RoleUser, abi.RoleAssistant, abi.RoleTool)
		}
		om := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			om.ToolCalls = append(om.ToolCalls, openai.ToolCall{
				ID: tc.ID, Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: tc.Name, Arguments: tc.Arguments},
			})
		}
		req.Messages = append(req.Messages, om)
	}
	for i, t := range params.Tools {
		if t.Name == "" {
			return req, invalid("tools[%d] has no name", i)
		}
		var schema any = t.Parameters
		if t.Parameters == nil {
			// The protocol wants a schema; a tool without arguments has an
			// empty one.
			schema = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		req.Tools = append(req.Tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: t.Name, Description: t.Description, Parameters: schema,
		}})
	}
	if params.Temperature != nil {
		req.Temperature = float32(*params.Temperature)
		if req.Temperature == 0 {
			// go-openai leaves a zero temperature out of the request,
			// which the endpoint reads as its default (1 on OpenAI); the
			// smallest positive float asks for greedy sampling all the same.
			req.Temperature = math.SmallestNonzeroFloat32
		}
	}
	if params.MaxTokens > 0 {
		if reasoningModel(req.Model) {
			req.MaxCompletionTokens = params.MaxTokens
		} else {
			// max_tokens is what Ollama, vLLM and llama.cpp read;
			// OpenAI's reasoning models want max_completion_tokens.
			//lint:ignore SA1019 the field compatible servers understand
			req.MaxTokens = params.MaxTokens
		}
	}
	if req.Stream {
		req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	}
	return req, nil
}

// reasoningModel reports OpenAI models that refuse max_tokens.
func reasoningModel(model string) bool {
	for _, prefix := range []string{"o1", "o3", "o4", "gpt-5", "gpt-6"} {
		if strings.HasPrefix(model, prefix) {
			return true
		}
	}
	return false
}

// complete asks for the whole answer in one response.
func (p *Provider) complete(ctx context.Context, req openai.ChatCompletionRequest) (abi.ChatResult, error) {
	resp, err := p.client.CreateChatCompletion(ctx, req)
	if err != nil {
		return abi.ChatResult{}, err
	}
	if len(resp.Choices) == 0 {
		return abi.ChatResult{}, errNoChoices
	}
	c := resp.Choices[0]
	res := abi.ChatResult{
		Message:      abi.ChatMessage{Role: abi.RoleAssistant, Content: c.Message.Content},
		FinishReason: string(c.FinishReason),
		Model:        resp.Model,
		Usage: abi.ChatUsage{
			PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens, TotalTokens: resp.Usage.TotalTokens,
		},
	}
	for _, tc := range c.Message.ToolCalls {
		res.Message.ToolCalls = append(res.Message.ToolCalls, abi.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return res, nil
}

// errNoChoices and errNoData are answers that parse but say nothing.
var (
	errNoChoices = errors.New("the answer holds no choices")
	errNoData    = errors.New("the stream ended without a single data: event")
)

// stream asks for the answer as server-sent events and puts the deltas
// together into one message.
func (p *Provider) stream(ctx context.Context, req openai.ChatCompletionRequest) (abi.ChatResult, error) {
	s, err := p.client.CreateChatCompletionStream(ctx, req)
	if err != nil {
		return abi.ChatResult{}, err
	}
	defer s.Close()
	var a assembler
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return abi.ChatResult{}, err
		}
		a.add(chunk)
	}
	if a.chunks == 0 {
		return abi.ChatResult{}, errNoData
	}
	return a.result(), nil
}

// assembler puts the deltas of a streamed answer together. Content comes in
// pieces; each tool call starts with its id and name and then its
// arguments, a JSON text, come in pieces, told apart by the call's index.
type assembler struct {
	chunks  int
	content strings.Builder
	calls   []abi.ToolCall
	byIndex map[int]int // the stream's tool-call index → calls
	finish  string
	model   string
	usage   abi.ChatUsage
}

func (a *assembler) add(r openai.ChatCompletionStreamResponse) {
	a.chunks++
	if r.Model != "" {
		a.model = r.Model
	}
	if u := r.Usage; u != nil {
		a.usage = abi.ChatUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	}
	for _, c := range r.Choices {
		if c.Index != 0 {
			continue // only one choice is asked for
		}
		a.content.WriteString(c.Delta.Content)
		for _, tc := range c.Delta.ToolCalls {
			a.addCall(tc)
		}
		if c.FinishReason != "" && c.FinishReason != openai.FinishReasonNull {
			a.finish = string(c.FinishReason)
		}
	}
}

func (a *assembler) addCall(tc openai.ToolCall) {
	i := -1
	switch {
	case tc.Index != nil:
		if j, ok := a.byIndex[*tc.Index]; ok {
			i = j
		}
	case tc.ID != "":
		// A server that leaves out the index: the id tells the calls apart.
		for j := range a.calls {
			if a.calls[j].ID == tc.ID {
				i = j
			}
		}
	case len(a.calls) > 0:
		i = len(a.calls) - 1 // neither: a piece of the last call
	}
	if i < 0 {
		a.calls = append(a.calls, abi.ToolCall{})
		i = len(a.calls) - 1
		if tc.Index != nil {
			if a.byIndex == nil {
				a.byIndex = map[int]int{}
			}
			a.byIndex[*tc.Index] = i
		}
	}
	c := &a.calls[i]
	if tc.ID != "" {
		c.ID = tc.ID
	}
	// The name comes whole in the first piece; some servers repeat it.
	if n := tc.Function.Name; n != "" && n != c.Name {
		c.Name += n
	}
	c.Arguments += tc.Function.Arguments
}

func (a *assembler) result() abi.ChatResult {
	return abi.ChatResult{
		Message:      abi.ChatMessage{Role: abi.RoleAssistant, Content: a.content.String(), ToolCalls: a.calls},
		FinishReason: a.finish,
		Usage:        a.usage,
		Model:        a.model,
	}
}
