package llm

import (
	"regexp"
	"strings"

	"github.com/kairo-os/kairo/abi"
)

// Redacted takes the place of a secret in the recorded events.
const Redacted = "[REDACTED]"

// minSecret is the shortest key replaced wherever it appears: a shorter one
// (a local server's placeholder such as "none") is no secret, and replacing
// it in every message would garble them.
const minSecret = 8

// secretPatterns find credentials by their shape, whoever typed them: a key
// pasted into a message, a header quoted in a tool's output.
var secretPatterns = []struct {
	re   *regexp.Regexp
	with string
}{
	// A header or setting that names a credential, its value whatever it is.
	{regexp.MustCompile(`(?i)\b((?:proxy-)?authorization|x-api-key|api[-_]?key|api[-_]?token|access[-_]?token|secret[-_]?key)(["']?\s*[:=]\s*["']?)(?:(?:bearer|basic|token)\s+)?[^\s"',;}]+`), "${1}${2}" + Redacted},
	{regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}`), "${1} " + Redacted},
	// Keys of well-known forms: OpenAI, Anthropic, DeepSeek... (sk-),
	// GitHub, Slack, AWS access key ids, Google API keys.
	{regexp.MustCompile(`\bsk-[A-Za-z0-9][A-Za-z0-9_-]{15,}`), Redacted},
	{regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{30,}`), Redacted},
	{regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}`), Redacted},
	{regexp.MustCompile(`\bAKIA[0-9A-Z]{16}\b`), Redacted},
	{regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}`), Redacted},
}

// Redact replaces in text each of secrets (those of at least 8 bytes) and
// anything that looks like a credential — a bearer token, an Authorization
// or API-key header, a key such as "sk-..." — with Redacted.
func Redact(text string, secrets ...string) string {
	return newRedactor(secrets...).text(text)
}

// redactor removes secrets from what is recorded.
type redactor struct {
	secrets []string
}

func newRedactor(secrets ...string) *redactor {
	r := &redactor{}
	for _, s := range secrets {
		if len(s) >= minSecret {
			r.secrets = append(r.secrets, s)
		}
	}
	return r
}

func (r *redactor) text(s string) string {
	for _, secret := range r.secrets {
		s = strings.ReplaceAll(s, secret, Redacted)
	}
	for _, p := range secretPatterns {
		s = p.re.ReplaceAllString(s, p.with)
	}
	return s
}

func (r *redactor) err(err error) string { return r.text(err.Error()) }

// params is a redacted copy of p; p is left as it is.
func (r *redactor) params(p abi.ChatParams) abi.ChatParams {
	out := p
	out.Messages = r.messages(p.Messages)
	out.Tools = nil
	for _, t := range p.Tools {
		out.Tools = append(out.Tools, abi.Tool{
			Name:        r.text(t.Name),
			Description: r.text(t.Description),
			Parameters:  r.value(t.Parameters).(map[string]any),
		})
	}
	return out
}

func (r *redactor) messages(ms []abi.ChatMessage) []abi.ChatMessage {
	if ms == nil {
		return nil
	}
	out := make([]abi.ChatMessage, len(ms))
	for i, m := range ms {
		out[i] = r.message(m)
	}
	return out
}

func (r *redactor) message(m abi.ChatMessage) abi.ChatMessage {
	out := abi.ChatMessage{Role: m.Role, Content: r.text(m.Content), Name: r.text(m.Name), ToolCallID: m.ToolCallID}
	for _, tc := range m.ToolCalls {
		tc.Arguments = r.text(tc.Arguments)
		out.ToolCalls = append(out.ToolCalls, tc)
	}
	return out
}

// result is a redacted copy of res.
func (r *redactor) result(res abi.ChatResult) abi.ChatResult {
	res.Message = r.message(res.Message)
	return res
}

// value redacts the strings inside a decoded schema, keys and values.
func (r *redactor) value(v any) any {
	switch v := v.(type) {
	case string:
		return r.text(v)
	case map[string]any:
		if v == nil {
			return v
		}
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[r.text(k)] = r.value(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = r.value(x)
		}
		return out
	}
	return v
}
