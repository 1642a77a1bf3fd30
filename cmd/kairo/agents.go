package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/jsonview"
)

func runAgents(ctx context.Context, args []string) error {
	f := newFlags("agents", "kairo agents [--json]", `
List the agents the running daemon runs: [agent], the default one (marked
*), and each [agents.ID] of kairo.toml. For each: its policy, its open run
loops, its grants (the skills it may run by name, whether it may run
commands of its choosing, the folders they may work in, the hosts they
may reach), the agents it acts for with its own grants, and what it is
for. A message goes to the agent it names (kairo send --agent ID, or
"@ID" at its start), else to the default one.

With --json, one JSON object per agent: id, default, policy,
description, grants (skills, commands, folders, hosts), actsFor, memory
(the agent whose memory it uses: its own id, the id of the agent whose
memory it shares, or "" for none) and open.`)
	asJSON := f.Bool("json", false, "print one JSON object per agent")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	res, err := listAgents(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		for _, a := range res.Agents {
			fmt.Printf("%s\n", marshalJSON(jsonview.NewAgent(a)))
		}
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  ID\tPOLICY\tOPEN\tSKILLS\tCOMMANDS\tFOLDERS\tHOSTS\tACTS FOR\tDESCRIPTION")
	for _, a := range res.Agents {
		mark := "  "
		if a.Default {
			mark = "* "
		}
		g := a.Grants
		fmt.Fprintf(w, "%s%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", mark, termLine(a.ID), termLine(a.Policy), a.Open,
			termLine(listOrDash(g.Skills)), yesNo(g.Commands), termLine(listOrDash(g.Folders)), termLine(listOrDash(g.Hosts)),
			termLine(listOrDash(a.ActsFor)), termLine(clip(a.Description, 60)))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Println("\n* the default agent: a message that names no agent goes to it; kairo send --agent ID, or @ID at a message's start, names one.")
	return nil
}

// listAgents asks the daemon for its agents, the default one first.
func listAgents(ctx context.Context) (abi.AgentsResult, error) {
	var res abi.AgentsResult
	err := callKernel(ctx, "kairo agents", abi.MethodAgentList, nil, &res)
	return res, err
}

// listOrDash is l joined by commas, or "-" for none.
func listOrDash(l []string) string { return orDash(strings.Join(l, ",")) }
