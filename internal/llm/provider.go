package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	openai "github.com/sashabaranov/go-openai"
)

// Config configures a Provider. BaseURL and Model are required; the zero
// value of every other field is useful.
type Config struct {
	// BaseURL is the endpoint's API root: "https://api.openai.com/v1",
	// "http://localhost:11434/v1"...
	BaseURL string
	// Model is asked for when a request names none.
	Model string
	// APIKey is sent as a bearer token; "" sends none. APIKeyEnv names the
	// variable it came from, for the errors that say how to fix it.
	APIKey    string
	APIKeyEnv string
	// Timeout bounds each HTTP request, from sending it to the last token.
	// Default 60s.
	Timeout time.Duration
	// MaxRetries is how many times a request that met a rate limit (429),
	// a server error (5xx) or a dropped connection is sent again.
	MaxRetries int
	// Stream asks for the answer as server-sent events.
	Stream bool
	// Backoff is the pause before the first retry; it doubles each retry
	// up to MaxBackoff, less a random part so that clients spread out. A
	// Retry-After from the endpoint takes its place. Defaults 500ms and 10s.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// MaxResponseBytes bounds the body of each answer, streamed or not, as
	// it is read: a body that goes past it is cut there and the request
	// fails, saying so (no retry: the endpoint would answer the same).
	// Default DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// HTTPClient sends the requests; default a client of the Provider's own.
	HTTPClient *http.Client
	// Bus, when set, records every request and its response as
	// kairo.llm.request and kairo.llm.response events, durably, with the
	// API key and anything that looks like a credential redacted.
	Bus *bus.Bus
}

// DefaultMaxResponseBytes is the cap on an answer's body when
// Config.MaxResponseBytes is 0: far above any answer a model writes for the
// agent (a 128k-token completion is ~0.5 MiB), far below what would hurt.
const DefaultMaxResponseBytes = 4 << 20

// maxRetryAfter bounds the wait an endpoint may ask for: past it the
// request fails at once, saying how long the endpoint asked to wait.
const maxRetryAfter = time.Minute

// Provider is the live Chatter: it asks an OpenAI-compatible endpoint.
type Provider struct {
	cfg      Config
	client   *openai.Client
	url      string // the chat-completions URL, without credentials, for errors
	endpoint string // BaseURL without credentials, for the recording
	redact   *redactor
	// sleep waits between attempts; tests replace it to see the waits.
	sleep func(ctx context.Context, d time.Duration) error
}

// New returns a Provider for cfg.
func New(cfg Config) (*Provider, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("llm: base URL %q is not an http(s) URL; give the API root of an OpenAI-compatible endpoint, such as \"http://localhost:11434/v1\"", cfg.BaseURL)
	}
	if cfg.Model == "" {
		return nil, errors.New("llm: no model: name the model to ask for when a request names none")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	cfg.MaxRetries = max(cfg.MaxRetries, 0)
	if cfg.Backoff <= 0 {
		cfg.Backoff = 500 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 10 * time.Second
	}
	cfg.MaxBackoff = max(cfg.MaxBackoff, cfg.Backoff)
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	oc.HTTPClient = doer{c: hc, max: cfg.MaxResponseBytes}
	endpoint := publicURL(u)
	return &Provider{
		cfg:      cfg,
		client:   openai.NewClientWithConfig(oc),
		url:      strings.TrimRight(endpoint, "/") + "/chat/completions",
		endpoint: endpoint,
		redact:   newRedactor(cfg.APIKey),
		sleep:    sleep,
	}, nil
}

// publicURL is u without user info, query or fragment, which may hold keys.
func publicURL(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.Fragment = nil, "", ""
	return c.String()
}

// Chat sends p to the endpoint, again while the failure is worth a retry,
// and records the request and its outcome when the Provider has a bus.
func (p *Provider) Chat(ctx context.Context, params abi.ChatParams) (abi.ChatResult, error) {
	req, err := p.request(params)
	if err != nil {
		return abi.ChatResult{}, err
	}
	var reqEv *abi.Event
	if p.cfg.Bus != nil {
		if reqEv, err = p.recordRequest(ctx, params, req.Model); err != nil {
			return abi.ChatResult{}, err
		}
	}
	start := time.Now()
	res, attempts, err := p.send(ctx, req)
	if p.cfg.Bus != nil {
		// Recorded even when the caller gave up, so a replay meets the
		// same outcome.
		rctx := context.WithoutCancel(ctx)
		if rerr := p.recordResponse(rctx, reqEv, res, err, attempts, time.Since(start)); rerr != nil && err == nil {
			return abi.ChatResult{}, rerr
		}
	}
	return res, err
}

// send runs the attempts of one request.
func (p *Provider) send(ctx context.Context, req openai.ChatCompletionRequest) (abi.ChatResult, int, error) {
	for n := 1; ; n++ {
		res, at, err := p.attempt(ctx, req)
		if err == nil {
			return res, n, nil
		}
		e := p.explain(ctx, err, at, req.Model)
		e.Attempts = n
		if !e.retry || n > p.cfg.MaxRetries {
			if e.retry && p.cfg.MaxRetries > 0 {
				e.Msg += fmt.Sprintf("; gave up after %d retries ([llm] max_retries)", p.cfg.MaxRetries)
			}
			return abi.ChatResult{}, n, e
		}
		wait := p.backoff(n)
		if at.retryAfter >= 0 {
			wait = at.retryAfter
		}
		if wait > maxRetryAfter {
			e.Msg += fmt.Sprintf("; the endpoint asks to wait %s before trying again", wait.Round(time.Second))
			return abi.ChatResult{}, n, e
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			e.Msg += fmt.Sprintf("; a retry in %s would pass the caller's deadline", wait.Round(time.Millisecond))
			return abi.ChatResult{}, n, e
		}
		if err := p.sleep(ctx, wait); err != nil {
			e.Msg += "; the caller gave up while waiting to retry"
			return abi.ChatResult{}, n, e
		}
	}
}

// backoff is the pause before retry n (1-based): Backoff doubled n-1 times,
// up to MaxBackoff, the upper half of it chosen at random.
func (p *Provider) backoff(n int) time.Duration {
	d := p.cfg.MaxBackoff
	if n-1 < 32 {
		d = min(p.cfg.Backoff<<(n-1), p.cfg.MaxBackoff)
	}
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// attempt is one HTTP request under the timeout. The doer fills in what
// go-openai's errors leave out: the status and the Retry-After header.
func (p *Provider) attempt(ctx context.Context, req openai.ChatCompletionRequest) (abi.ChatResult, *answer, error) {
	at := &answer{retryAfter: -1}
	actx, cancel := context.WithTimeout(context.WithValue(ctx, answerKey{}, at), p.cfg.Timeout)
	defer cancel()
	var res abi.ChatResult
	var err error
	if req.Stream {
		res, err = p.stream(actx, req)
	} else {
		res, err = p.complete(actx, req)
	}
	if err != nil && actx.Err() != nil && ctx.Err() == nil {
		at.timedOut = true
	}
	if res.Model == "" {
		res.Model = req.Model
	}
	return res, at, err
}

// answer is what the doer saw of the HTTP answer to one attempt.
type answer struct {
	status     int
	retryAfter time.Duration // -1: the endpoint did not say
	timedOut   bool
	// bodyBroken: reading the body failed below HTTP (a dropped
	// connection), as opposed to a body that ended where it said.
	bodyBroken bool
	// tooLarge: the body went past Config.MaxResponseBytes and was cut.
	tooLarge bool
}

type answerKey struct{}

// doer sends go-openai's requests and notes the status and Retry-After of
// each answer in the attempt's context, which go-openai's errors drop. It
// cuts each body at max bytes.
type doer struct {
	c   *http.Client
	max int64
}

func (d doer) Do(r *http.Request) (*http.Response, error) {
	resp, err := d.c.Do(r)
	if resp != nil {
		at, _ := r.Context().Value(answerKey{}).(*answer)
		if at == nil {
			at = &answer{retryAfter: -1}
		}
		at.status = resp.StatusCode
		at.retryAfter = retryAfter(resp.Header, time.Now())
		resp.Body = &body{ReadCloser: resp.Body, at: at, left: d.max, max: d.max}
	}
	return resp, err
}

// errTooLarge ends the read of a body past the cap.
var errTooLarge = errors.New("the answer is larger than [llm] max_response_bytes")

// body cuts the answer at the cap, and notes a read that failed below HTTP.
type body struct {
	io.ReadCloser
	at   *answer
	left int64 // bytes still allowed
	max  int64
}

func (b *body) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.left <= 0 {
		// One byte more tells a body of exactly max bytes from a longer one.
		var one [1]byte
		n, err := b.ReadCloser.Read(one[:])
		switch {
		case n > 0:
			b.at.tooLarge = true
			return 0, fmt.Errorf("%w (%d bytes)", errTooLarge, b.max)
		case err != nil && err != io.EOF:
			b.at.bodyBroken = true
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if err != nil && err != io.EOF {
		b.at.bodyBroken = true
	}
	return n, err
}

// retryAfter reads how long the endpoint asks to wait: OpenAI's
// retry-after-ms, else Retry-After in seconds or as an HTTP date. -1 when
// neither says.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return -1
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return -1
}
