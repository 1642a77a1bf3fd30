// Package llm is the host method llm.chat: how a policy plugin, or an IPC
// client, asks a language model for the next assistant message.
//
// A Chatter answers chat requests. Provider is the live one: it speaks
// OpenAI's chat-completions protocol (through github.com/sashabaranov/go-openai)
// to any compatible endpoint — OpenAI, Ollama, vLLM, a llama.cpp server —
// streaming or not, with tool calls, retries on rate limits and server
// errors, and a timeout per request. It records every request and response
// on the bus as kairo.llm.request and kairo.llm.response events, secrets
// redacted. Replay answers from such a recording instead, so a run loop can
// be run again without a model, and says where a run departs from it. Mux
// sends each run loop's requests to the Chatter set for it, so one run can
// be replayed while the others talk to the model. Register puts a Chatter
// in the kernel's method table.
package llm

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/manifests"
)

// Chatter answers chat requests: the live Provider, a Replay, a Mux of
// both, Unconfigured. Implementations are safe for concurrent use.
type Chatter interface {
	// Chat returns the assistant's next message for the conversation in p.
	// Errors are *Error, *DivergenceError, *abi.Error or the context's.
	Chat(ctx context.Context, p abi.ChatParams) (abi.ChatResult, error)
}

// Register adds the method llm.chat, answered by c, to k's table. It
// replaces an earlier registration, so calling it again switches the
// Chatter; to switch one run loop only, register a Mux.
func Register(k *kernel.Kernel, c Chatter) {
	k.Register(kernel.Method{
		Name:    abi.MethodLLMChat,
		Summary: "ask the configured language model for the next assistant message (OpenAI chat format, tool calls)",
		Handler: func(ctx context.Context, call *kernel.Call) (any, error) {
			var p abi.ChatParams
			if err := call.Decode(&p); err != nil {
				return nil, err
			}
			res, err := c.Chat(ctx, p)
			if err != nil {
				return nil, ToABIError(err)
			}
			return res, nil
		},
		// Not Quick: a request takes as long as the model does.
	})
}

// Open returns the Chatter that kairo.toml's [llm] table describes: a
// Provider recording on b, with the key read from the environment variable
// c.APIKeyEnv names, or Unconfigured when c sets no endpoint.
func Open(c manifests.LLMConfig, b *bus.Bus) (Chatter, error) {
	if !c.Configured() {
		return Unconfigured{}, nil
	}
	var key string
	if c.APIKeyEnv != "" {
		key = os.Getenv(c.APIKeyEnv)
	}
	return New(Config{
		BaseURL:    c.BaseURL,
		Model:      c.Model,
		APIKey:     key,
		APIKeyEnv:  c.APIKeyEnv,
		Timeout:    c.TimeoutDuration(),
		MaxRetries: c.MaxRetries,
		Stream:     c.Stream,
		Bus:        b,
		// Validate keeps it within int64.
		MaxResponseBytes: int64(c.MaxResponseBytes),
	})
}

// Unconfigured answers every request with an unavailable error that says how
// to configure an endpoint: the Chatter of a kairo.toml without [llm].
type Unconfigured struct{}

// Chat fails: there is no model to ask.
func (Unconfigured) Chat(context.Context, abi.ChatParams) (abi.ChatResult, error) {
	return abi.ChatResult{}, abi.Errorf(abi.CodeUnavailable,
		"no LLM is configured: set base_url and model in the [llm] table of kairo.toml "+
			"(e.g. base_url = \"http://localhost:11434/v1\", model = \"llama3.2\" for Ollama, or "+
			"base_url = \"https://api.openai.com/v1\" with the key in $OPENAI_API_KEY), then restart kairo up")
}

// Error is a request the endpoint did not answer: what was asked, what
// failed and what to do.
type Error struct {
	// Code is the abi error code the method answers with: unavailable
	// (endpoint down, rate limited, server error, timeout, malformed
	// answer), permission_denied (the key), not_found (the model or the
	// URL), invalid_params (a request the endpoint rejected).
	Code string
	// Status is the HTTP status of the last answer; 0 when there was none.
	Status int
	// URL is the endpoint asked, without credentials.
	URL string
	// Attempts counts the HTTP requests made, retries included.
	Attempts int
	// Msg says what failed and what to do.
	Msg string
	// Err is the underlying error, if any.
	Err error

	retry bool // worth sending again
}

// Error names the endpoint, the HTTP status when there was one, what
// failed, and the attempts when there were retries.
func (e *Error) Error() string {
	s := "llm: POST " + e.URL
	if e.Status != 0 {
		s += fmt.Sprintf(": HTTP %d", e.Status)
	}
	s += ": " + e.Msg
	if e.Attempts > 1 {
		s += fmt.Sprintf(" (after %d attempts)", e.Attempts)
	}
	return s
}

// Unwrap is the underlying error, for errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Err }

// DivergenceError says that a replayed run loop asked the model something
// other than what its recording holds at the same place.
type DivergenceError struct {
	RunLoopID string
	// Request is the 1-based number of the request within the run loop.
	Request int
	// What names the first difference.
	What string
}

// Error names the run loop, the request and the first difference.
func (e *DivergenceError) Error() string {
	return fmt.Sprintf("replay of run loop %q diverged at LLM request %d: %s", e.RunLoopID, e.Request, e.What)
}

// ToABIError turns an error of a Chatter into what llm.chat answers with.
func ToABIError(err error) *abi.Error {
	var ae *abi.Error
	var le *Error
	var de *DivergenceError
	switch {
	case errors.As(err, &de):
		return &abi.Error{Code: abi.CodeReplayDiverged, Message: de.Error()}
	case errors.As(err, &le):
		return &abi.Error{Code: le.Code, Message: le.Error()}
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return abi.Errorf(abi.CodeUnavailable, "%s: %v", abi.MethodLLMChat, err)
	}
	return abi.Errorf(abi.CodeInternal, "%s: %v", abi.MethodLLMChat, err)
}
