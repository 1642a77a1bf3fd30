package memory

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestOpenAIEmbedderBatches(t *testing.T) {
	srv := newFakeEmbedServer(t)
	e := srv.embedder(t, 128)
	texts := make([]string, 300)
	for i := range texts {
		texts[i] = fmt.Sprintf("segment %d: disk usage on web-%02d", i, i%7)
	}
	texts[5] = "" // endpoints refuse an empty input; the embedder sends a space
	vecs, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.requests.Load(); got != 3 {
		t.Errorf("300 texts in batches of 128 took %d requests, want 3", got)
	}
	if len(vecs) != len(texts) {
		t.Fatalf("%d vectors for %d texts", len(vecs), len(texts))
	}
	for _, i := range []int{0, 127, 128, 299} {
		if !reflect.DeepEqual(vecs[i], fakeEmbedding(texts[i])) {
			t.Errorf("vector %d is not the endpoint's vector for its text: out of order?", i)
		}
	}
	if e.Model() != fakeModel {
		t.Errorf("model %q", e.Model())
	}
}

func TestOpenAIEmbedderErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  OpenAIConfig
		says string
	}{
		{OpenAIConfig{BaseURL: "localhost:11434", Model: "m"}, "not an http(s) URL"},
		{OpenAIConfig{BaseURL: "ftp://example.com/v1", Model: "m"}, "not an http(s) URL"},
		{OpenAIConfig{BaseURL: "http://localhost:11434/v1"}, "model is empty"},
		{OpenAIConfig{BaseURL: "http://localhost:11434/v1", Model: "m", BatchSize: -1}, "may be negative"},
	} {
		if _, err := NewOpenAIEmbedder(c.cfg); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: %v, want it to say %q", c.cfg, err, c.says)
		}
	}
	srv := newFakeEmbedServer(t)
	ctx := context.Background()
	srv.failing.Store(true)
	if _, err := srv.embedder(t, 0).Embed(ctx, []string{"x"}); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("server error: %v, want the status", err)
	}
	srv.failing.Store(false)
	wrong, _ := NewOpenAIEmbedder(OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "no-such-model", APIKey: "test-key"})
	if _, err := wrong.Embed(ctx, []string{"x"}); err == nil || !strings.Contains(err.Error(), "no-such-model") {
		t.Errorf("unknown model: %v, want the model named", err)
	}
	noKey, _ := NewOpenAIEmbedder(OpenAIConfig{BaseURL: "http://user:secret@" + strings.TrimPrefix(srv.URL, "http://") + "/v1", Model: fakeModel})
	if _, err := noKey.Embed(ctx, []string{"x"}); err == nil || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "secret") {
		t.Errorf("missing key: %v; want a 401 and no credentials in the message", err)
	}
	slow, _ := NewOpenAIEmbedder(OpenAIConfig{BaseURL: "http://10.255.255.1/v1", Model: "m", Timeout: 50 * time.Millisecond})
	start := time.Now()
	if _, err := slow.Embed(ctx, []string{"x"}); err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("unreachable endpoint: %v after %v; want an error within the timeout", err, time.Since(start))
	}
}
