// Command kairo is Kairo's one CLI: it runs the daemon (`kairo up`) and talks
// to a running one over its Unix socket.
//
//	kairo up [--config FILE] [--home DIR]      run the kernel in the foreground
//	kairo send [--agent ID] "TEXT" | chat      talk to the agent, or to agent ID
//	kairo agents [--json]                      the agents, their grants and open run loops
//	kairo console [--print]                    open the web console, or print its address
//	kairo runs [--agent ID] [show ID]          the agents' run loops
//	kairo replay --run ID                      re-run a run loop's decisions
//	kairo memory search QUERY | show ANCHOR    what the agent remembers, and from where
//	kairo memory forget --anchor|--task|--query make it forget (recorded)
//	kairo approvals [--all]                    what waits for a person's yes
//	kairo approve ID | deny [--reason R] ID    decide it (the first decision stands)
//	kairo tools [NAME...]                      list the agent's tools
//	kairo events publish SUBJECT [JSON]        append an event
//	kairo events tail [PATTERN]                follow events live
//	kairo events replay [PATTERN]              print stored events
//	kairo spawn [--pty] [--] CMD [ARGS...]     run a process, attached
//	kairo run [--explain] SKILL.toml [-- ARGS] run a binary skill in its sandbox
//	kairo sandbox check                        what the sandbox enforces here
//	kairo store check | salvage NEW.db         check or salvage the event store
//	kairo plugins [restart|grant|revoke NAME]  list the daemon's plugins
//	kairo plugin inspect FILE.wasm             what a plugin module is
//	kairo attach ID | kill [--signal SIG] ID   follow or signal a process
//	kairo ps                                   list processes
//	kairo ping | status | version
//
// The daemon's data folder is --home, else $KAIRO_HOME, else ./.kairo; it
// names the folder in a file of its user's ($XDG_RUNTIME_DIR/kairo/current,
// else in the user's cache folder) while it runs. A client's data folder is
// $KAIRO_HOME, else ./.kairo if a kernel listens there, else the one that
// file names if a kernel listens there, else ./.kairo. Clients find the
// socket at $KAIRO_SOCKET, else where kairo.toml in that folder puts it,
// else kernel.sock in it.
//
// Errors go to stderr as "kairo: <message>" with exit code 1; a command line
// kairo cannot read exits with 2. spawn and attach exit with the process's
// code.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	// The daemon links the SQLite store; kairo offers JetStream too
	// ([store] kind = "jetstream"), which links the NATS server.
	_ "github.com/kairo-os/kairo/kernel/bus/jetstream"
	"github.com/kairo-os/kairo/sandbox"
)

// version is set at build time:
//
//	go build -ldflags "-X main.version=v0.1.0" ./cmd/kairo
var version = "dev"

// command is one subcommand. run gets the arguments after its name; ctx ends
// on SIGINT or SIGTERM.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string) error
}

var commands []command

func init() {
	// Set here, not in the declaration: help refers to commands.
	commands = []command{
		{"up", "run the kernel in the foreground until SIGINT or SIGTERM", runUp},
		{"send", "send the agent a message and print its replies (--agent ID: to that agent)", runSend},
		{"chat", "talk to the agent, a line at a time (--agent ID: to that agent)", runChat},
		{"agents", "list the agents: the default one, their grants, their open run loops", runAgents},
		{"console", "print the console's address (the web page) and open it in a browser", runConsole},
		{"runs", "list the agents' run loops (--agent ID: one agent's), or show one (kairo runs show ID)", runRuns},
		{"approvals", "list the approvals waiting for a person (--all: the decided ones too)", runApprovals},
		{"approve", "approve a pending approval: kairo approve ID", runApprove},
		{"deny", "deny a pending approval: kairo deny [--reason TEXT] ID", runDeny},
		{"tools", "list the agent's tools with their sources and grants", runTools},
		{"skills", "list the installed binary skills, or add one (kairo skills add FOLDER)", runSkills},
		{"secrets", "set, list and remove the operator's secrets (kairo secrets help)", runSecrets},
		{"replay", "re-run a run loop's decisions against its recording (kairo replay --run ID)", runReplayRun},
		{"memory", "search, show and forget what the agent remembers (kairo memory help)", runMemory},
		{"events", "publish, tail and replay events (kairo events help)", runEvents},
		{"spawn", "run a process in the kernel, attached to this terminal", runSpawn},
		{"run", "run a binary skill under its manifest's sandbox", runRun},
		{"sandbox", "show what the sandbox enforces here (kairo sandbox check)", runSandbox},
		{"store", "check the event store, or salvage a damaged one (kairo store check | salvage NEW.db)", runStore},
		{"plugins", "list the daemon's plugins, restart one, or grant one more (kairo plugins grant NAME call=...)", runPlugins},
		{"plugin", "inspect a plugin module: kairo plugin inspect FILE.wasm", runPlugin},
		{"attach", "follow a process's output until it exits", runAttach},
		{"kill", "send a signal to a process (default SIGKILL)", runKill},
		{"ps", "list processes", runPs},
		{"ping", "measure a round trip to the kernel", runPing},
		{"status", "show the kernel's version, methods and counters", runStatus},
		{"traces", "send past run loops to the trace receiver again (kairo traces export --run ID)", runTraces},
		{"debug", "write the daemon's heap profile, for go tool pprof (kairo debug heap)", runDebug},
		{"version", "print kairo's version, ABI version and Go version", runVersion},
		{"help", "show this help, or a command's: kairo help COMMAND", runHelp},
	}
}

func main() {
	if sandbox.IsHelper() {
		sandbox.HelperMain() // confine this process and exec the target; never returns
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// run executes the command line and returns the exit code.
func run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		printUsage(os.Stderr)
		return 2
	}
	err := dispatch(ctx, commands, "kairo", args)
	var ue *usageError
	var code exitCode
	switch {
	case err == nil, errors.Is(err, errHelpShown):
		return 0
	case errors.As(err, &code):
		return int(code)
	case errors.Is(err, errUsageShown):
		return 2
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "kairo: %s\n", termText(ue.msg))
		if ue.synopsis != "" {
			fmt.Fprintf(os.Stderr, "usage: %s\n", ue.synopsis)
		}
		return 2
	}
	// An error may carry what the daemon, a plugin or a tool server said.
	fmt.Fprintf(os.Stderr, "kairo: %s\n", termText(strings.TrimSpace(err.Error())))
	return 1
}

// dispatch runs the command args[0] of cmds; prefix names the command group
// in messages ("kairo", "kairo events").
func dispatch(ctx context.Context, cmds []command, prefix string, args []string) error {
	name := args[0]
	if name == "-h" || name == "--help" || name == "-help" {
		name = "help"
	}
	for _, c := range cmds {
		if c.name == name {
			return c.run(ctx, args[1:])
		}
	}
	return &usageError{msg: fmt.Sprintf("unknown command %q; `%s help` lists the commands", args[0], prefix)}
}

func printUsage(w *os.File) {
	fmt.Fprint(w, `kairo is the command line of Kairo, a single-host AgentOS.

usage: kairo COMMAND [flags] [args]

commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Run "kairo COMMAND -h" for a command's flags.

environment:
  KAIRO_HOME    the data folder: events.db, kernel.sock, kairo.toml (default ./.kairo;
                a client with neither finds the kernel its user started elsewhere)
  KAIRO_SOCKET  the kernel's socket (default $KAIRO_HOME/kernel.sock)
`)
}

func runHelp(ctx context.Context, args []string) error {
	if len(args) == 0 {
		printUsage(os.Stdout)
		return nil
	}
	if args[0] == "help" {
		return &usageError{msg: "`kairo help COMMAND` shows a command's help"}
	}
	return dispatch(ctx, commands, "kairo", append(args[:len(args):len(args)], "-h"))
}
