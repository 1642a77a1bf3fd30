package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kairo-os/kairo/abi"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// listTools lists every tool of the server, page after page, up to max:
// a list that goes on past it fails (a server that pages for ever would
// otherwise never let the start end).
func listTools(ctx context.Context, cs *sdk.ClientSession, max int) ([]abi.Tool, error) {
	tools := []abi.Tool{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		if len(tools) == max {
			return nil, fmt.Errorf("list tools: the server lists more than %d tools, the most taken of one server; raise max_tools of its [mcp.NAME] in kairo.toml if it really has that many", max)
		}
		tools = append(tools, toolOf(t))
	}
	return tools, nil
}

// toolOf is an MCP tool in the OpenAI function format: its input schema is
// the function's parameters.
func toolOf(t *sdk.Tool) abi.Tool {
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	params, _ := t.InputSchema.(map[string]any)
	if params == nil && t.InputSchema != nil {
		// A schema of another Go type: through JSON, to the map the
		// function format wants.
		if b, err := json.Marshal(t.InputSchema); err == nil {
			json.Unmarshal(b, &params)
		}
	}
	if params == nil {
		params = map[string]any{}
	}
	if _, ok := params["type"]; !ok {
		params["type"] = "object"
	}
	return abi.Tool{Name: t.Name, Description: desc, Parameters: params}
}

// resultText is a tool result as text: text content as it is, other
// content described in a line, structured content as JSON when there is
// no other.
func resultText(r *sdk.CallToolResult) string {
	var b strings.Builder
	for i, c := range r.Content {
		if i > 0 {
			b.WriteByte('\n')
		}
		switch c := c.(type) {
		case *sdk.TextContent:
			b.WriteString(c.Text)
		case *sdk.ImageContent:
			fmt.Fprintf(&b, "[image: %s, %d bytes]", c.MIMEType, len(c.Data))
		case *sdk.AudioContent:
			fmt.Fprintf(&b, "[audio: %s, %d bytes]", c.MIMEType, len(c.Data))
		case *sdk.ResourceLink:
			fmt.Fprintf(&b, "[resource link: %s %s", c.URI, c.Name)
			if c.Description != "" {
				fmt.Fprintf(&b, ": %s", c.Description)
			}
			b.WriteByte(']')
		case *sdk.EmbeddedResource:
			resource(&b, c.Resource)
		default:
			fmt.Fprintf(&b, "[content of type %T]", c)
		}
	}
	if len(r.Content) == 0 && r.StructuredContent != nil {
		if j, err := json.Marshal(r.StructuredContent); err == nil {
			b.Write(j)
		}
	}
	return b.String()
}

func resource(b *strings.Builder, r *sdk.ResourceContents) {
	switch {
	case r == nil:
		b.WriteString("[resource]")
	case r.Blob != nil:
		fmt.Fprintf(b, "[resource: %s, %s, %d bytes]", r.URI, r.MIMEType, len(r.Blob))
	default:
		fmt.Fprintf(b, "[resource: %s]\n%s", r.URI, r.Text)
	}
}
