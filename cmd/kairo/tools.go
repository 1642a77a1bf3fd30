package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/abi/modelname"
	"github.com/kairo-os/kairo/internal/jsonview"
)

func runTools(ctx context.Context, args []string) error {
	f := newFlags("tools", "kairo tools [--json] [NAME...]", `
List the agent's tools in the running daemon: each tool's name, where it
comes from and what it may reach. Sources: kernel (the process methods, in
the agent's session), skill (a binary skill, under its manifest's
sandbox), plugin (a wasm tool plugin, within its manifest's grants), mcp
(a tool of an MCP server). With NAMEs, show those tools whole: description
and parameters (the JSON schema a model fills in).

With --json, one JSON object per tool: name, offered, description,
parameters, source, origin, grants, error.`)
	asJSON := f.Bool("json", false, "print one JSON object per tool")
	names, err := f.parse(args, 0, -1)
	if err != nil {
		return err
	}
	var res abi.ToolsListResult
	if err := callKernel(ctx, "kairo tools", abi.MethodToolsList, nil, &res); err != nil {
		return err
	}
	list := res.Tools
	offered := offeredNames(res.Tools)
	if len(names) > 0 {
		list = nil
		for _, n := range names {
			i := slices.IndexFunc(res.Tools, func(t abi.ToolInfo) bool { return t.Name == n })
			if i < 0 {
				return fmt.Errorf("no tool %q; `kairo tools` lists them", n)
			}
			list = append(list, res.Tools[i])
		}
	}
	switch {
	case *asJSON:
		for _, t := range list {
			fmt.Printf("%s\n", marshalJSON(newToolJSON(t, offered[t.Name])))
		}
		return nil
	case len(names) > 0:
		for i, t := range list {
			if i > 0 {
				fmt.Println()
			}
			printTool(t, offered[t.Name])
		}
		return nil
	case len(list) == 0:
		fmt.Println("no tools")
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tSOURCE\tGRANTS")
	for _, t := range list {
		fmt.Fprintf(w, "%s\t%s\t%s\n", termLine(t.Name), termLine(t.Source), termLine(toolGrants(t)))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, t := range list {
		if t.Error != "" {
			fmt.Printf("\n%s: %s\n", termLine(t.Name), termText(t.Error))
		}
	}
	// A name that had to be cut or told apart from another is offered to
	// the model under another name than its plain rewrite: say which.
	for _, t := range list {
		if o := offered[t.Name]; o != "" && o != modelname.Sanitize(t.Name) {
			fmt.Printf("\n%s: offered to the model as %s\n", termLine(t.Name), o)
		}
	}
	return nil
}

// newToolJSON is the --json form of a tool, the console's too.
func newToolJSON(t abi.ToolInfo, offered string) jsonview.Tool { return jsonview.NewTool(t, offered) }

// offeredNames are the names the LLM policy offers the callable tools to
// the model under (jsonview.OfferedNames).
func offeredNames(tools []abi.ToolInfo) map[string]string { return jsonview.OfferedNames(tools) }

// printTool shows one tool. Its name, description and error come from
// whoever provides the tool (an MCP server, a plugin, a skill's manifest),
// so each is escaped for the terminal.
func printTool(t abi.ToolInfo, offered string) {
	fmt.Printf("name\t%s\n", termLine(t.Name))
	if offered != "" {
		fmt.Printf("offered\t%s (the name the model is offered it under)\n", offered)
	}
	fmt.Printf("source\t%s%s\n", termLine(t.Source), termLine(wrap(" (", t.Origin, ")")))
	fmt.Printf("grants\t%s\n", termLine(toolGrants(t)))
	if t.Error != "" {
		fmt.Printf("error\t%s\n", termText(t.Error))
	}
	fmt.Printf("about\t%s\n", termText(orDash(t.Description)))
	fmt.Printf("params\t%s\n", marshalJSON(t.Parameters))
}

func toolGrants(t abi.ToolInfo) string {
	if len(t.Grants) == 0 {
		return "none"
	}
	return strings.Join(t.Grants, "; ")
}

func wrap(before, s, after string) string {
	if s == "" {
		return ""
	}
	return before + s + after
}
