// Package testserver is the MCP server internal/mcp's tests talk to: a real
// server built with the official SDK, run over stdio as a process of its own
// (testdata/server) or in the test over streamable HTTP.
package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Config choose the server's tools and paging.
type Config struct {
	// PageSize is how many tools one tools/list page holds; 0 is the
	// SDK's default.
	PageSize int
	// Process adds the tools that act on the server's own process: crash,
	// spawn_child and pid. Only a server that runs as a process of its
	// own may have them.
	Process bool
	// Child is the argv that spawn_child starts (the server binary in its
	// child mode).
	Child []string
	// Named adds, for each name, a tool of that name that says its name.
	Named []string
	// Big adds the tool big, which answers with as many bytes as it is
	// asked for: a result past any cap.
	Big bool
}

// New returns the server with its tools.
func New(o Config) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "kairo-test", Version: "1"}, &mcp.ServerOptions{PageSize: o.PageSize})
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Says text back."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
			Text string `json:"text" jsonschema:"what to say back"`
		}) (*mcp.CallToolResult, any, error) {
			return text(in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds two numbers."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
			A float64 `json:"a"`
			B float64 `json:"b"`
		}) (*mcp.CallToolResult, any, error) {
			return text(strconv.FormatFloat(in.A+in.B, 'g', -1, 64)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Sleeps, then answers."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
			MS int `json:"ms"`
		}) (*mcp.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(in.MS) * time.Millisecond):
				return text("slept"), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
			Message string `json:"message"`
		}) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New(in.Message)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "read_file", Description: "Reads a file."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
			Path string `json:"path"`
		}) (*mcp.CallToolResult, any, error) {
			b, err := os.ReadFile(in.Path)
			if err != nil {
				return nil, nil, err
			}
			return text(string(b)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "picture", Description: "Answers with text and an image."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "a picture:"},
				&mcp.ImageContent{MIMEType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}},
			}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add_tool", Description: "Adds a tool that says its name."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
			Name string `json:"name"`
		}) (*mcp.CallToolResult, any, error) {
			name := in.Name
			mcp.AddTool(s, &mcp.Tool{Name: name, Description: "Added while running."},
				func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
					return text(name), nil, nil
				})
			return text("added " + name), nil, nil
		})
	for _, name := range o.Named {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: "Says its name."},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return text(name), nil, nil
			})
	}
	if o.Big {
		mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Answers with as many bytes as asked."},
			func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
				Bytes int `json:"bytes"`
			}) (*mcp.CallToolResult, any, error) {
				return text(strings.Repeat("b", in.Bytes)), nil, nil
			})
	}
	if !o.Process {
		return s
	}
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Ends the server's process at once."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
			Code int `json:"code"`
		}) (*mcp.CallToolResult, any, error) {
			fmt.Fprintf(os.Stderr, "crashing on purpose with code %d\n", in.Code)
			os.Exit(in.Code)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "The server's process id."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return text(strconv.Itoa(os.Getpid())), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "spawn_child", Description: "Starts a child process that ignores SIGTERM; answers its pid."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			if len(o.Child) == 0 {
				return nil, nil, errors.New("this server has no child command")
			}
			c := exec.Command(o.Child[0], o.Child[1:]...)
			if err := c.Start(); err != nil {
				return nil, nil, err
			}
			go c.Wait() // reaped if it ever ends while the server runs
			return text(strconv.Itoa(c.Process.Pid)), nil, nil
		})
	return s
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
