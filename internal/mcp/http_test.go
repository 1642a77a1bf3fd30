package mcp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kairo-os/kairo/internal/mcp/internal/testserver"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveHTTP serves the test tools over streamable HTTP with the SDK's
// handler, two tools a page. restart replaces the server with a fresh one
// that knows none of the sessions of the old.
func serveHTTP(t *testing.T) (h *httptest.Server, restart func()) {
	var current atomic.Pointer[sdk.StreamableHTTPHandler]
	restart = func() {
		srv := testserver.New(testserver.Config{PageSize: 2})
		current.Store(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	}
	restart()
	h = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { current.Load().ServeHTTP(w, r) }))
	t.Cleanup(h.Close)
	return h, restart
}

// connectHTTP connects to the server at url and closes it after the test.
func connectHTTP(t *testing.T, url string) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Connect(ctx, nil, ServerConfig{Name: "web", URL: url}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// The same tools over streamable HTTP: no kernel, no process.
func TestStreamableHTTP(t *testing.T) {
	h, _ := serveHTTP(t)
	s := connectHTTP(t, h.URL)
	want := []string{"add", "add_tool", "echo", "fail", "picture", "read_file", "slow"}
	if got := toolNames(s.Tools()); !slices.Equal(got, want) {
		t.Errorf("tools = %v, want %v", got, want)
	}
	if got := call(t, s, "add", `{"a":1,"b":2}`); got != "3" {
		t.Errorf("add = %q, want 3", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, isErr, err := s.Call(ctx, "fail", `{"message":"no"}`)
	if err != nil || !isErr || out != "no" {
		t.Errorf("fail = %q, %v, %v; want a tool error \"no\"", out, isErr, err)
	}
	changed := s.ToolsChanged()
	call(t, s, "add_tool", `{"name":"late"}`)
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Errorf("no change of the tool list within 10s")
	}
	if _, ok := tool(s.Tools(), "late"); !ok {
		t.Errorf("tools = %v, want late among them", toolNames(s.Tools()))
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Call(ctx, "echo", `{"text":"x"}`); !errors.Is(err, ErrClosed) {
		t.Errorf("call after Close = %v, want ErrClosed", err)
	}

	// Nothing listens at the URL: Connect says where it tried.
	h.Close()
	_, err = Connect(ctx, nil, ServerConfig{Name: "gone", URL: h.URL}, quiet)
	if err == nil || !strings.Contains(err.Error(), h.URL) {
		t.Errorf("Connect to a closed URL = %v, want an error naming it", err)
	}
}

// An HTTP server that forgets the session (it restarted): the call fails,
// and the next one connects anew.
func TestStreamableHTTPReconnects(t *testing.T) {
	h, restart := serveHTTP(t)
	s := connectHTTP(t, h.URL)
	call(t, s, "echo", `{"text":"1"}`)
	restart()
	if _, _, err := s.Call(context.Background(), "echo", `{"text":"2"}`); err == nil {
		t.Fatal("a call in a session the server forgot succeeded")
	}
	if got := call(t, s, "echo", `{"text":"3"}`); got != "3" {
		t.Errorf("echo after reconnecting = %q", got)
	}
}
