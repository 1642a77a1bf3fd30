package abi

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The params and results of the memory methods (memory.retrieve,
// memory.search, memory.expand, memory.forget) and the pieces they are
// made of: what
// long-term memory returns of the run loops it indexed.

// MemorySegmentType says what part of a run loop a segment is.
type MemorySegmentType string

// The segment types (seed 003's MemoryAnchor.segmentType).
const (
	// MemorySegmentUserMessage is the goal that opened the run loop, or a
	// message the user added to it later.
	MemorySegmentUserMessage MemorySegmentType = "user_message"
	// MemorySegmentReasoning is a policy's thought; written only when
	// reasoning is kept.
	MemorySegmentReasoning MemorySegmentType = "reasoning"
	// MemorySegmentToolCall is a tool_call action (or a cancel, which the
	// runtime carries out through the kernel).
	MemorySegmentToolCall MemorySegmentType = "tool_call"
	// MemorySegmentToolResult is a tool's result, or a milestone the
	// runtime noted (kairo.agent.note: a process that finished, its last
	// lines).
	MemorySegmentToolResult MemorySegmentType = "tool_result"
	// MemorySegmentResponse is what the agent said or asked the user, or
	// the summary the run loop ended with.
	MemorySegmentResponse MemorySegmentType = "response"
)

// MemoryAnchor locates a segment in its run loop, precisely enough to find
// it again: memory.expand takes one back to the segments around it.
type MemoryAnchor struct {
	RunLoopID string `json:"runLoopId" msgpack:"runLoopId"`
	// IterationIndex counts the run loop's iterations from 0.
	IterationIndex int `json:"iterationIndex" msgpack:"iterationIndex"`
	// SegmentIndex counts the segments of the iteration from 0.
	SegmentIndex int               `json:"segmentIndex" msgpack:"segmentIndex"`
	SegmentType  MemorySegmentType `json:"segmentType" msgpack:"segmentType"`
	// Timestamp is when the event the segment was cut from happened.
	Timestamp time.Time `json:"timestamp" msgpack:"timestamp"`
}

// String renders the anchor as "runLoop#iteration.segment(type)".
func (a MemoryAnchor) String() string {
	return fmt.Sprintf("%s#%d.%d(%s)", a.RunLoopID, a.IterationIndex, a.SegmentIndex, a.SegmentType)
}

// Ref is the anchor as a person types it: RUNLOOP#ITERATION.SEGMENT,
// without the type, so a shell takes it as one word.
func (a MemoryAnchor) Ref() string {
	return fmt.Sprintf("%s#%d.%d", a.RunLoopID, a.IterationIndex, a.SegmentIndex)
}

// ParseMemoryAnchor reads an anchor as [MemoryAnchor.String] writes it,
// "runLoop#iteration.segment(type)"; the type may be left out.
func ParseMemoryAnchor(s string) (MemoryAnchor, error) {
	loop, it, sg, typ, ok := splitMemoryAnchor(strings.TrimSpace(s))
	if !ok {
		return MemoryAnchor{}, fmt.Errorf("memory: anchor %q: want RUNLOOP#ITERATION.SEGMENT, as a search shows it (e.g. 0193…#0.2)", s)
	}
	i, err1 := strconv.Atoi(it)
	n, err2 := strconv.Atoi(sg)
	if err := errors.Join(err1, err2); err != nil {
		return MemoryAnchor{}, fmt.Errorf("memory: anchor %q: %w", s, err)
	}
	return MemoryAnchor{RunLoopID: loop, IterationIndex: i, SegmentIndex: n, SegmentType: MemorySegmentType(typ)}, nil
}

// splitMemoryAnchor cuts LOOP#DIGITS.DIGITS, then an optional (type) of
// [a-z_], out of s: LOOP holds no '#' and no white space. (A regexp would
// link package regexp into every plugin.)
func splitMemoryAnchor(s string) (loop, it, sg, typ string, ok bool) {
	loop, rest, found := strings.Cut(s, "#")
	if !found || loop == "" || strings.ContainsAny(loop, " \t\n\f\r") {
		return
	}
	digits := func() string {
		n := 0
		for n < len(rest) && '0' <= rest[n] && rest[n] <= '9' {
			n++
		}
		d := rest[:n]
		rest = rest[n:]
		return d
	}
	if it = digits(); it == "" || !strings.HasPrefix(rest, ".") {
		return
	}
	rest = rest[1:]
	if sg = digits(); sg == "" {
		return
	}
	if rest == "" {
		return loop, it, sg, "", true
	}
	typ, found = strings.CutPrefix(rest, "(")
	if typ, found2 := strings.CutSuffix(typ, ")"); found && found2 && typ != "" && strings.Trim(typ, "abcdefghijklmnopqrstuvwxyz_") == "" {
		return loop, it, sg, typ, true
	}
	return "", "", "", "", false
}

// MemoryOrigin says whose words a segment holds: the user's, the agent's
// own, or data that came from outside — a tool, a process, an MCP server —
// which a prompt must show as quoted data, never as instructions or as the
// agent's words.
type MemoryOrigin string

// The origins.
const (
	// MemoryOriginUser is the user's message.
	MemoryOriginUser MemoryOrigin = "user"
	// MemoryOriginAgent is what the agent said, asked or called, in its
	// own words (a reply that quotes data is the data's origin, Quotes
	// set).
	MemoryOriginAgent MemoryOrigin = "agent"
	// MemoryOriginTool is the result of a kernel or plugin tool.
	MemoryOriginTool MemoryOrigin = "tool"
	// MemoryOriginProcess is what a process printed or how it ended.
	MemoryOriginProcess MemoryOrigin = "process"
	// MemoryOriginMCP is the result of an MCP server's tool.
	MemoryOriginMCP MemoryOrigin = "mcp"
	// MemoryOriginSkill is the result of a binary skill.
	MemoryOriginSkill MemoryOrigin = "skill"
	// MemoryOriginUnknown is a segment indexed before provenance was
	// kept: data until the run loop is indexed again from the log.
	MemoryOriginUnknown MemoryOrigin = "unknown"
)

// MemoryProvenance says where a segment's words came from. The task is the
// anchor's run loop.
type MemoryProvenance struct {
	Origin MemoryOrigin `json:"origin" msgpack:"origin"`
	// Source names what the data came from: the tool ("mcp.web.fetch",
	// "skill.checksum"), or the process's command line.
	Source string `json:"source,omitempty" msgpack:"source,omitempty"`
	// Quotes marks an agent's reply or call that repeats data verbatim:
	// its words are the data's, so Origin and Source are the data's.
	Quotes bool `json:"quotes,omitempty" msgpack:"quotes,omitempty"`
}

// IsData reports whether the words came from outside: anything but the
// user's message and the agent's own words.
func (p MemoryProvenance) IsData() bool {
	return p.Quotes || (p.Origin != MemoryOriginUser && p.Origin != MemoryOriginAgent)
}

// Describe says where the words came from, for a person or a model:
// "process `make test`", "MCP server web (tool mcp.web.fetch)".
func (p MemoryProvenance) Describe() string {
	var what string
	switch p.Origin {
	case MemoryOriginUser:
		return "the user"
	case MemoryOriginAgent:
		return "the agent"
	case MemoryOriginProcess:
		what = "process"
		if p.Source != "" {
			what += " `" + p.Source + "`"
		}
	case MemoryOriginMCP:
		server, _, _ := strings.Cut(strings.TrimPrefix(p.Source, "mcp."), ".")
		what = "MCP server " + server + " (tool " + p.Source + ")"
	case MemoryOriginSkill:
		what = "skill " + strings.TrimPrefix(p.Source, "skill.")
	case MemoryOriginTool:
		what = "tool " + p.Source
	default:
		what = "an unknown source (remembered before provenance was kept)"
	}
	if p.Quotes {
		return "the agent's reply quoting " + what
	}
	return what
}

// MemoryChunk is a segment as retrieval returns it: memory.retrieve
// answers a list of them.
type MemoryChunk struct {
	Anchor MemoryAnchor `json:"anchor" msgpack:"anchor"`
	Text   string       `json:"text" msgpack:"text"`
	Score  float64      `json:"score" msgpack:"score"`
	// MemoryProvenance says whose words Text holds: show data as data.
	MemoryProvenance
}

// MemoryExpanded is a chunk with the run loop around it: memory.expand's
// result.
type MemoryExpanded struct {
	RunLoopID string `json:"runLoopId" msgpack:"runLoopId"`
	// Goal is the run loop's first user message.
	Goal  string      `json:"goal" msgpack:"goal"`
	Focus MemoryChunk `json:"focus" msgpack:"focus"`
	// Before and After are the chunks of the run loop before and after
	// Focus, in run loop order, at most the window asked for each.
	Before []MemoryChunk `json:"before" msgpack:"before"`
	After  []MemoryChunk `json:"after" msgpack:"after"`
	// Segments is how many segments the run loop has in all.
	Segments int `json:"segments" msgpack:"segments"`
}

// MemorySegmentRef names a segment so that it is found again when its run
// loop is cut anew from the log: by the event it was cut from and its
// type, or, for a segment without an event id, by its place.
type MemorySegmentRef struct {
	RunLoopID      string            `json:"runLoopId" msgpack:"runLoopId"`
	EventID        string            `json:"eventId,omitempty" msgpack:"eventId,omitempty"`
	SegmentType    MemorySegmentType `json:"segmentType" msgpack:"segmentType"`
	IterationIndex int               `json:"iterationIndex" msgpack:"iterationIndex"`
	SegmentIndex   int               `json:"segmentIndex" msgpack:"segmentIndex"`
}

// MemoryRetrieveParams are memory.retrieve's params ([MethodMemoryRetrieve]);
// it answers []MemoryChunk.
type MemoryRetrieveParams struct {
	Query string `msgpack:"query"`
	K     int    `msgpack:"k,omitempty"`
	// Agent is the agent whose memory is read; "" the default agent's.
	Agent string `msgpack:"agent,omitempty"`
}

// MemorySearchParams are memory.search's params ([MethodMemorySearch]): a
// page of Limit chunks (0 for the store's default) from Cursor, "" for the
// first. It answers a [MemorySearchPage].
type MemorySearchParams struct {
	Query  string `msgpack:"query"`
	Limit  int    `msgpack:"limit,omitempty"`
	Cursor string `msgpack:"cursor,omitempty"`
	Agent  string `msgpack:"agent,omitempty"` // as in MemoryRetrieveParams
}

// MemorySearchPage is a page of memory.search: its chunks, best first, and
// the cursor of the next page, "" after the last.
type MemorySearchPage struct {
	Chunks []MemoryChunk `msgpack:"chunks"`
	Next   string        `msgpack:"next,omitempty"`
}

// MemoryExpandParams are memory.expand's params ([MethodMemoryExpand]); it
// answers a [MemoryExpanded].
type MemoryExpandParams struct {
	Anchor MemoryAnchor `msgpack:"anchor"`
	Window int          `msgpack:"window,omitempty"`
	Agent  string       `msgpack:"agent,omitempty"` // as in MemoryRetrieveParams
}

// MemoryForgetParams are memory.forget's params ([MethodMemoryForget]):
// exactly one of an anchor (as [MemoryAnchor.String] writes it), a run
// loop (every segment of it), or a query (every segment whose text holds
// it). It answers a [MemoryForgetResult]; it is the operator's alone.
type MemoryForgetParams struct {
	Anchor string `msgpack:"anchor,omitempty"`
	Task   string `msgpack:"task,omitempty"`
	Query  string `msgpack:"query,omitempty"`
	Agent  string `msgpack:"agent,omitempty"` // as in MemoryRetrieveParams
}

// MemoryForgetResult is what memory.forget forgot.
type MemoryForgetResult struct {
	// Segments are the segments it removed from the store.
	Segments []MemorySegmentRef `msgpack:"segments"`
	// Recorded is whether kairo.memory.forgotten was recorded (nothing
	// matched a query: nothing to record).
	Recorded bool `msgpack:"recorded"`
}

// MemoryIndexed is the data of kairo.memory.indexed
// ([SubjectMemoryIndexed]): a run loop is in long-term memory.
type MemoryIndexed struct {
	RunLoopID string `msgpack:"runLoopId"`
	Segments  int    `msgpack:"segments"`
}

// MemoryForgotten is the data of kairo.memory.forgotten
// ([SubjectMemoryForgotten]): what was asked (one of Anchor, Task, Query),
// by whom, and what that named when it was asked — whole run loops
// (Tasks) and single segments — which indexing a run loop again leaves
// out.
type MemoryForgotten struct {
	By       string             `msgpack:"by"`
	Anchor   string             `msgpack:"anchor,omitempty"`
	Task     string             `msgpack:"task,omitempty"`
	Query    string             `msgpack:"query,omitempty"`
	Tasks    []string           `json:"tasks,omitempty" msgpack:"tasks,omitempty"`
	Segments []MemorySegmentRef `json:"segments,omitempty" msgpack:"segments,omitempty"`
}
