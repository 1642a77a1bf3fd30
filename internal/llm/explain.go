package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/kairo-os/kairo/abi"
	openai "github.com/sashabaranov/go-openai"
)

// explain turns what went wrong in an attempt into an *Error that says what
// to do, and whether a retry may help.
func (p *Provider) explain(ctx context.Context, err error, at *answer, model string) *Error {
	e := &Error{Code: abi.CodeUnavailable, URL: p.url, Status: at.status, Err: err}
	status, detail := httpStatus(err)
	if status != 0 {
		e.Status = status
	}
	if detail != "" {
		detail = ": " + p.redact.text(detail)
	}
	var jsonSyntax *json.SyntaxError
	var jsonType *json.UnmarshalTypeError
	switch {
	case ctx.Err() != nil:
		e.Msg = fmt.Sprintf("the caller gave up: %v", ctx.Err())
	case at.tooLarge:
		e.Msg = fmt.Sprintf("the answer was cut at %d bytes, the cap on an answer; it is not used. Raise [llm] max_response_bytes in kairo.toml if the model's answers are meant to be that long, or ask for fewer tokens", p.cfg.MaxResponseBytes)
	case at.timedOut:
		e.Msg = fmt.Sprintf("no complete answer within the timeout of %s; raise [llm] timeout in kairo.toml, ask for fewer tokens, or check the endpoint's load", p.cfg.Timeout)
	case e.Status == 401:
		e.Code = abi.CodePermissionDenied
		e.Msg = "the endpoint refused the API key" + detail + "; " + p.keyAdvice()
	case e.Status == 403:
		e.Code = abi.CodePermissionDenied
		e.Msg = fmt.Sprintf("the key may not use model %q or this endpoint%s; check the key's permissions, or choose another model in [llm] model", model, detail)
	case e.Status == 404:
		e.Code = abi.CodeNotFound
		e.Msg = fmt.Sprintf("model %q not found, or no chat API at this URL%s; check [llm] model (GET %s/models lists what the endpoint serves) and base_url (OpenAI-compatible servers answer under /v1)", model, detail, strings.TrimRight(p.endpoint, "/"))
	case e.Status == 429:
		e.retry = true
		e.Msg = "rate limited" + detail + "; wait, lower the request rate, or raise the account's quota"
	case e.Status >= 500:
		e.retry = true
		e.Msg = "the endpoint failed" + detail + "; if it goes on, check the server's logs or status page"
	case e.Status >= 400:
		e.Code = abi.CodeInvalidParams
		e.Msg = "the endpoint rejected the request" + detail
	case isModelRefusal(err):
		e.Code = abi.CodeInvalidParams
		e.Msg = fmt.Sprintf("model %q does not take this request: %v", model, err)
	case errors.As(err, &jsonSyntax), errors.As(err, &jsonType), errors.Is(err, errNoChoices),
		// JSON cut short, though the body arrived whole.
		errors.Is(err, io.ErrUnexpectedEOF) && at.status != 0 && !at.bodyBroken:
		e.Msg = fmt.Sprintf("malformed answer, not an OpenAI chat completion: %v; is [llm] base_url the API root of an OpenAI-compatible server (ending in /v1)?", err)
	case errors.Is(err, errNoData), errors.Is(err, openai.ErrTooManyEmptyStreamMessages):
		e.Msg = fmt.Sprintf("malformed stream: %v; set [llm] stream = false for a server that does not stream", err)
	case streamError(err) != "":
		e.Msg = "the endpoint reported an error in the stream: " + p.redact.text(streamError(err))
	default:
		e.retry, e.Msg = p.explainNetwork(err)
	}
	return e
}

// explainNetwork says what went wrong below HTTP, and whether a retry may
// help: a server that is starting or restarting refuses connections or
// drops them for a moment.
func (p *Provider) explainNetwork(err error) (bool, string) {
	var dnsErr *net.DNSError
	var op *net.OpError
	var ne net.Error
	switch {
	case errors.As(err, &dnsErr):
		return false, fmt.Sprintf("cannot resolve the endpoint's host: %v; check [llm] base_url", p.redact.err(err))
	case errors.Is(err, syscall.ECONNREFUSED), errors.As(err, &op) && op.Op == "dial":
		return true, fmt.Sprintf("cannot connect: %v; is the server running, and [llm] base_url right?", p.redact.err(err))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		return true, fmt.Sprintf("the connection dropped before the answer was complete: %v", p.redact.err(err))
	case errors.As(err, &ne):
		return true, fmt.Sprintf("network error: %v", p.redact.err(err))
	}
	return false, p.redact.err(err)
}

// httpStatus is the status and the endpoint's own message in go-openai's
// error, if it carries them.
func httpStatus(err error) (int, string) {
	var ae *openai.APIError
	var re *openai.RequestError
	switch {
	case errors.As(err, &re):
		body := strings.TrimSpace(string(re.Body))
		if len(body) > 300 {
			body = body[:300] + "…"
		}
		return re.HTTPStatusCode, body
	case errors.As(err, &ae):
		return ae.HTTPStatusCode, ae.Message
	}
	return 0, ""
}

// streamError is the message of an error event inside a stream.
func streamError(err error) string {
	var ae *openai.APIError
	if errors.As(err, &ae) {
		return ae.Message
	}
	return ""
}

// keyAdvice says how to give the endpoint a key.
func (p *Provider) keyAdvice() string {
	env := p.cfg.APIKeyEnv
	switch {
	case env == "" && p.cfg.APIKey == "":
		return "no key was sent: set [llm] api_key_env to the name of the variable that holds one, set that variable, and restart kairo up"
	case env == "":
		return "check the key"
	case p.cfg.APIKey == "":
		return fmt.Sprintf("no key was sent: $%s ([llm] api_key_env) is unset or empty; set it to a valid key and restart kairo up", env)
	}
	return fmt.Sprintf("set $%s ([llm] api_key_env) to a valid key for this endpoint and restart kairo up", env)
}

// isModelRefusal reports what go-openai refuses before sending: parameters
// a model does not take.
func isModelRefusal(err error) bool {
	for _, target := range []error{
		openai.ErrChatCompletionInvalidModel, openai.ErrReasoningModelMaxTokensDeprecated,
		openai.ErrReasoningModelLimitationsLogprobs, openai.ErrReasoningModelLimitationsOther,
		openai.ErrReasoningSamplingUnsupported, openai.ErrReasoningToolsRequireResponses,
		openai.ErrReasoningEffortUnsupported, openai.ErrO1BetaLimitationsTools,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
