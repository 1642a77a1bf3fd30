package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/client"
)

var eventCommands []command

func init() {
	// Set here, not in the declaration: help refers to eventCommands.
	eventCommands = []command{
		{"publish", "append an event: kairo events publish SUBJECT [JSON]", runPublish},
		{"tail", "print events as they are published, until Ctrl-C", runTail},
		{"replay", "print stored events, then exit", runReplay},
		{"help", "show this help, or a command's: kairo events help COMMAND", runEventsHelp},
	}
}

func runEvents(ctx context.Context, args []string) error {
	if len(args) == 0 {
		printEventsUsage(os.Stderr)
		return errUsageShown
	}
	return dispatch(ctx, eventCommands, "kairo events", args)
}

func runEventsHelp(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] != "-h" {
		return dispatch(ctx, eventCommands, "kairo events", append(args[:len(args):len(args)], "-h"))
	}
	printEventsUsage(os.Stdout)
	return nil
}

func printEventsUsage(w io.Writer) {
	fmt.Fprint(w, "usage: kairo events COMMAND [flags] [args]\n\ncommands:\n")
	for _, c := range eventCommands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun \"kairo events COMMAND -h\" for a command's flags.\n")
}

func runPublish(ctx context.Context, args []string) error {
	f := newFlags("events publish", "kairo events publish [flags] SUBJECT [JSON]", `
Append an event on SUBJECT (dot-separated tokens, no wildcards) and print its
sequence number and ID once the kernel has stored it. JSON, if given, is the
event's data, converted to MsgPack; "-" reads it from stdin. Put flags before
"--" when the JSON starts with '-'. An ID given is stored in the operator's
scope, "operator/UID:ID", so it never takes an ID the kernel or another
publisher uses. Publishing an ID that is already stored (given again, or
as printed) stores nothing and prints the stored sequence number.`)
	id := f.String("id", "", "the event's `ID`, stored as operator/UID:ID (default: a new UUIDv7); makes the publish idempotent")
	corr := f.String("correlation", "", "the correlation `ID` (the run loop it belongs to)")
	caus := f.String("causation", "", "the `ID` of the event that caused this one")
	asJSON := f.Bool("json", false, "print the result as one JSON object")
	pos, err := f.parse(args, 1, 2)
	if err != nil {
		return err
	}
	ev := abi.Event{Type: pos[0], ID: *id, CorrelationID: *corr, CausationID: *caus} // the kernel sets the source: who publishes
	// Check here what the kernel would refuse, so the message comes even
	// when no kernel runs.
	if err := abi.ValidateSubject(ev.Type); err != nil {
		return err
	}
	if len(pos) == 2 {
		text := pos[1]
		if text == "-" {
			b, err := io.ReadAll(os.Stdin)
			if err != nil {
				return fmt.Errorf("read JSON data from stdin: %w", err)
			}
			text = string(b)
		}
		if ev.Data, err = jsonToMsgpack(text); err != nil {
			return err
		}
	}
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.Publish(ctx, ev)
	if err != nil {
		return callError("publish", err)
	}
	switch {
	case *asJSON:
		fmt.Printf("%s\n", marshalJSON(struct {
			Seq       uint64 `json:"seq"`
			ID        string `json:"id"`
			Duplicate bool   `json:"duplicate"`
		}{res.Seq, res.ID, res.Duplicate}))
	case res.Duplicate:
		fmt.Printf("duplicate of seq=%d id=%s\n", res.Seq, termLine(res.ID))
	default:
		fmt.Printf("published seq=%d id=%s\n", res.Seq, termLine(res.ID))
	}
	return nil
}

// printer writes events in the chosen form.
type printer struct {
	w    *bufio.Writer
	json bool
}

func newPrinter(asJSON bool) *printer {
	return &printer{w: bufio.NewWriterSize(os.Stdout, 64<<10), json: asJSON}
}

func (p *printer) print(ev *abi.Event) error {
	if p.json {
		p.w.Write(eventObject(ev))
	} else {
		p.w.WriteString(eventLine(ev))
	}
	return p.w.WriteByte('\n')
}

func patternArg(pos []string) (string, error) {
	if len(pos) == 0 {
		return ">", nil
	}
	if err := abi.ValidatePattern(pos[0]); err != nil {
		return "", err
	}
	return pos[0], nil
}

const eventFormat = `
Each event is one line: [seq] time type source data-as-JSON. With --json,
one JSON object per line with every envelope field: seq, id, type, source,
time, data, correlationId, causationId.

PATTERN is a subject pattern: "*" matches one token, ">" the rest, as in
"kairo.process.>" (default ">": every event).`

func runTail(ctx context.Context, args []string) error {
	f := newFlags("events tail", "kairo events tail [--from SEQ] [--json] [PATTERN]", `
Print events as they are published, until Ctrl-C. With --from, start with the
stored events from sequence number SEQ, then continue live.
`+eventFormat)
	from := f.Uint64("from", 0, "start at sequence number `SEQ` (default: the next event)")
	asJSON := f.Bool("json", false, "print one JSON object per event")
	pos, err := f.parse(args, 0, 1)
	if err != nil {
		return err
	}
	pattern, err := patternArg(pos)
	if err != nil {
		return err
	}
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	sub, err := c.Subscribe(ctx, pattern, *from)
	if err != nil {
		return callError("subscribe", err)
	}
	p := newPrinter(*asJSON)
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			p.w.Flush()
			if ctx.Err() != nil { // Ctrl-C: a normal end
				cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				sub.Close(cctx)
				return nil
			}
			if errors.Is(err, client.ErrClosed) {
				return errors.New("the kernel closed the connection (it stopped?)")
			}
			return callError("tail", err)
		}
		if err := p.print(ev); err != nil {
			return err
		}
		if err := p.w.Flush(); err != nil {
			return err
		}
	}
}

func runReplay(ctx context.Context, args []string) error {
	f := newFlags("events replay", "kairo events replay [flags] [PATTERN]", `
Print the stored events that match, in sequence order, then exit.
`+eventFormat)
	from := f.Uint64("from", 0, "the first sequence number `SEQ`")
	to := f.Uint64("to", 0, "the last sequence number `SEQ`")
	since := f.Duration("since", 0, "only events of the last `DURATION`, such as 10m or 2h")
	limit := f.Int("limit", 0, "print at most `N` events (default: no limit)")
	asJSON := f.Bool("json", false, "print one JSON object per event")
	pos, err := f.parse(args, 0, 1)
	if err != nil {
		return err
	}
	pattern, err := patternArg(pos)
	if err != nil {
		return err
	}
	if *since < 0 || *limit < 0 {
		return &usageError{msg: "--since and --limit must not be negative", synopsis: f.synopsis}
	}
	if *to != 0 && *to < *from {
		return &usageError{msg: fmt.Sprintf("--to %d is before --from %d", *to, *from), synopsis: f.synopsis}
	}
	params := abi.ReplayParams{Pattern: pattern, FromSeq: *from, ToSeq: *to, Limit: *limit}
	if *since > 0 {
		params.Since = time.Now().Add(-*since)
	}
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	p := newPrinter(*asJSON)
	_, err = c.Replay(ctx, params, p.print)
	if ferr := p.w.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return callError("replay", err)
	}
	return nil
}
