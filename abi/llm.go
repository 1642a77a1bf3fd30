package abi

import "time"

// The LLM host method and its recording. A policy plugin (or an IPC client)
// reaches a model only through the method llm.chat; every request and its
// response are events on the bus, so a run loop's conversation with the model
// can be read back and replayed.

// MethodLLMChat is the host method that asks the configured model for the
// next assistant message: [ChatParams] in, [ChatResult] out.
const MethodLLMChat = "llm.chat"

// The subjects of the recording, SubjectLLMRequest and SubjectLLMResponse,
// are in subjects.go.

// CodeReplayDiverged is the error code of llm.chat in replay mode when a
// request differs from the one recorded at the same place in the run loop.
const CodeReplayDiverged = "replay_diverged"

// Chat message roles, as in OpenAI's chat format.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// ChatMessage is one message of a conversation in OpenAI's chat format.
type ChatMessage struct {
	Role    string `msgpack:"role"`
	Content string `msgpack:"content,omitempty"`
	Name    string `msgpack:"name,omitempty"`
	// ToolCalls are the calls an assistant message asks for. Each ID is the
	// model's call id, which the tool message answering it repeats as
	// ToolCallID; CorrelationID is unused here.
	ToolCalls  []ToolCall `msgpack:"toolCalls,omitempty"`
	ToolCallID string     `msgpack:"toolCallId,omitempty"`
}

// ChatParams is llm.chat: the conversation so far and the tools the model
// may call.
type ChatParams struct {
	Messages []ChatMessage `msgpack:"messages"`
	Tools    []Tool        `msgpack:"tools,omitempty"`
	// Model overrides the configured model for this request.
	Model string `msgpack:"model,omitempty"`
	// Temperature is the sampling temperature; nil leaves the endpoint's
	// default.
	Temperature *float64 `msgpack:"temperature,omitempty"`
	// MaxTokens bounds the tokens of the answer; 0 leaves it to the endpoint.
	MaxTokens int `msgpack:"maxTokens,omitempty"`
	// CorrelationID is the run loop the request belongs to, CausationID the
	// event that prompted it; the recorded events carry both.
	CorrelationID string `msgpack:"correlationId,omitempty"`
	CausationID   string `msgpack:"causationId,omitempty"`
	// Purpose says what asks when it is not a policy deciding, such as
	// PurposeSummary; a replay of the policy passes such exchanges by.
	Purpose string `msgpack:"purpose,omitempty"`
}

// PurposeSummary marks the requests that rewrite a run loop's short-term
// memory summary.
const PurposeSummary = "memory.summary"

// ChatResult answers llm.chat.
type ChatResult struct {
	// Message is the assistant's message: its content, its tool calls or both.
	Message ChatMessage `msgpack:"message"`
	// FinishReason is why the model stopped: "stop", "tool_calls",
	// "length", "content_filter", or "" when the endpoint did not say.
	FinishReason string    `msgpack:"finishReason,omitempty"`
	Usage        ChatUsage `msgpack:"usage"`
	// Model is the model that answered, as the endpoint names it.
	Model string `msgpack:"model,omitempty"`
	// Replayed is set when the answer came from a recording, not a model.
	Replayed bool `msgpack:"replayed,omitempty"`
}

// ChatUsage counts the tokens of one request, as the endpoint reported them
// (zero when it did not).
type ChatUsage struct {
	PromptTokens     int `msgpack:"promptTokens,omitempty"`
	CompletionTokens int `msgpack:"completionTokens,omitempty"`
	TotalTokens      int `msgpack:"totalTokens,omitempty"`
}

// LLMRequest is the data of kairo.llm.request, with secrets redacted.
type LLMRequest struct {
	Params ChatParams `msgpack:"params"`
	// Model is the model asked for: Params.Model or the configured one.
	Model string `msgpack:"model,omitempty"`
	// Endpoint is the base URL of the endpoint, without credentials.
	Endpoint string `msgpack:"endpoint,omitempty"`
	Stream   bool   `msgpack:"stream,omitempty"`
}

// LLMResponse is the data of kairo.llm.response, with secrets redacted: the
// result, or the error the request ended with.
type LLMResponse struct {
	Result *ChatResult `msgpack:"result,omitempty"`
	Error  *Error      `msgpack:"error,omitempty"`
	// Attempts counts the HTTP requests made, retries included.
	Attempts int           `msgpack:"attempts,omitempty"`
	Duration time.Duration `msgpack:"duration"`
}
