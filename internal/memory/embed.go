package memory

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Embedder turns texts into vectors whose closeness says how close the
// texts are in meaning. With one configured, Store keeps a vector per
// segment beside the full-text index and fuses the two rankings.
type Embedder interface {
	// Embed returns one vector per text, in the order given, all of one
	// length.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Model names the space the vectors live in. Store compares only
	// vectors of the same model: switching models leaves the old vectors
	// unused until each run loop is indexed again.
	Model() string
}

// OpenAIConfig configures an OpenAIEmbedder. BaseURL and Model are
// required; the zero value of every other field is useful.
type OpenAIConfig struct {
	// BaseURL is the endpoint's API root, the part before /embeddings:
	// "https://api.openai.com/v1", "http://localhost:11434/v1" (Ollama),
	// a vLLM or llama.cpp server's /v1.
	BaseURL string
	// Model is the embeddings model: "text-embedding-3-small",
	// "nomic-embed-text"...
	Model string
	// APIKey is sent as a bearer token; "" sends none.
	APIKey string
	// Dimensions asks the endpoint for vectors of this length, for models
	// that can shorten theirs (OpenAI's text-embedding-3); 0 asks for the
	// model's own. Shorter vectors make vector search proportionally faster.
	Dimensions int
	// BatchSize is how many texts one request carries. Default 128.
	BatchSize int
	// Timeout bounds each request. Default 30s.
	Timeout time.Duration
	// HTTPClient sends the requests; default a client of the embedder's own.
	HTTPClient *http.Client
}

// DefaultBatchSize is OpenAIConfig.BatchSize when it is zero: well under
// the 2048 inputs OpenAI accepts, and small enough for local servers.
const DefaultBatchSize = 128

// OpenAIEmbedder is an Embedder that asks an OpenAI-compatible endpoint
// (POST {BaseURL}/embeddings), batching the texts.
type OpenAIEmbedder struct {
	cfg      OpenAIConfig
	endpoint string // BaseURL without credentials, for errors
	client   *openai.Client
}

// NewOpenAIEmbedder checks cfg and returns the embedder. It sends nothing:
// an endpoint that is down shows on the first Embed.
func NewOpenAIEmbedder(cfg OpenAIConfig) (*OpenAIEmbedder, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("memory: embeddings base URL %q is not an http(s) URL; give the API root of an OpenAI-compatible endpoint, such as \"http://localhost:11434/v1\"", cfg.BaseURL)
	}
	if cfg.Model == "" {
		return nil, errors.New("memory: embeddings model is empty; name the endpoint's embeddings model, such as \"text-embedding-3-small\"")
	}
	if cfg.BatchSize < 0 || cfg.Dimensions < 0 {
		return nil, fmt.Errorf("memory: embeddings batch size %d and dimensions %d: neither may be negative", cfg.BatchSize, cfg.Dimensions)
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.HTTPClient != nil {
		oc.HTTPClient = cfg.HTTPClient
	}
	u.User = nil
	return &OpenAIEmbedder{cfg: cfg, endpoint: u.String(), client: openai.NewClientWithConfig(oc)}, nil
}

// Model is the configured model's name.
func (e *OpenAIEmbedder) Model() string { return e.cfg.Model }

// Embed asks the endpoint for the texts' vectors, BatchSize texts a
// request, one request after another.
func (e *OpenAIEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += e.cfg.BatchSize {
		batch := texts[start:min(start+e.cfg.BatchSize, len(texts))]
		vecs, err := e.embedBatch(ctx, batch)
		if err != nil {
			return nil, err
		}
		if len(out) > 0 && len(vecs) > 0 && len(vecs[0]) != len(out[0]) {
			return nil, fmt.Errorf("memory: embeddings endpoint %s answered vectors of %d and of %d dimensions in one call; it must keep one length per model", e.endpoint, len(out[0]), len(vecs[0]))
		}
		out = append(out, vecs...)
	}
	return out, nil
}

func (e *OpenAIEmbedder) embedBatch(ctx context.Context, batch []string) ([][]float32, error) {
	input := make([]string, len(batch))
	for i, t := range batch {
		if strings.TrimSpace(t) == "" {
			t = " " // endpoints refuse an empty input
		}
		input[i] = t
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	res, err := e.client.CreateEmbeddings(ctx, openai.EmbeddingRequestStrings{
		Input: input, Model: openai.EmbeddingModel(e.cfg.Model), Dimensions: e.cfg.Dimensions,
	})
	if err != nil {
		return nil, fmt.Errorf("memory: embeddings endpoint %s, model %q: %w", e.endpoint, e.cfg.Model, err)
	}
	if len(res.Data) != len(batch) {
		return nil, fmt.Errorf("memory: embeddings endpoint %s answered %d vectors for %d texts", e.endpoint, len(res.Data), len(batch))
	}
	out := make([][]float32, len(batch))
	for i, d := range res.Data {
		// Servers may answer out of order; the index says whose it is.
		if d.Index < 0 || d.Index >= len(batch) || out[d.Index] != nil {
			return nil, fmt.Errorf("memory: embeddings endpoint %s answered index %d twice or out of range 0–%d", e.endpoint, d.Index, len(batch)-1)
		}
		if len(d.Embedding) == 0 || (i > 0 && len(d.Embedding) != len(res.Data[0].Embedding)) {
			return nil, fmt.Errorf("memory: embeddings endpoint %s answered a vector of %d dimensions at index %d; want one length, more than 0", e.endpoint, len(d.Embedding), d.Index)
		}
		out[d.Index] = d.Embedding
	}
	return out, nil
}
