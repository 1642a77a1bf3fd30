package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/jsonview"
	"github.com/kairo-os/kairo/kernel/bus"
)

// The bounds of GET /api/events.
const (
	DefaultEventsLimit = 2000
	MaxEventsLimit     = 10000
)

// events answers the newest events of the log, newest first: at most
// limit, before the sequence number before when it is given, and the last
// sequence number of the log, which the stream follows from. With
// outside=K, of the events outside the agents' work (a subject outside
// kairo.> and no correlationId: no run loop holds them) only the newest K
// are answered, and omitted counts the others: the page's first paint
// reads the run loops of a window without the thousands of other events
// it would not draw.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	began := time.Now()
	q := r.URL.Query()
	limit := DefaultEventsLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxEventsLimit {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: give a number of events from 1 to %d", v, MaxEventsLimit))
			return
		}
		limit = n
	}
	b := s.cfg.Kernel.Bus
	last := b.LastSeq()
	to := last
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("before %q: give the sequence number of the oldest event held", v))
			return
		}
		to = min(n-1, last)
	}
	pg := eventPage{outside: -1}
	if v := q.Get("outside"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > MaxEventsLimit {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("outside %q: give how many of the events outside run loops to answer, from 0 to %d", v, MaxEventsLimit))
			return
		}
		pg.outside = n
	}
	from := uint64(1)
	if to > uint64(limit) {
		from = to - uint64(limit) + 1
	}
	key := answerKey{from: from, to: to, last: last, outside: pg.outside}
	if body, ok := s.answers.get(key); ok {
		writeEvents(w, body, began)
		return
	}
	if to > 0 {
		var err error
		if pg.outside >= 0 {
			err = s.runs.read(r.Context(), b, from, to, &pg)
		} else {
			err = b.Replay(r.Context(), bus.Query{FromSeq: from, ToSeq: to}, pg.add)
		}
		var gap *bus.GapError
		if errors.As(err, &gap) && gap.To < to {
			// A bounded store dropped the oldest: what it still holds.
			pg.reset()
			err = b.Replay(r.Context(), bus.Query{FromSeq: gap.To + 1, ToSeq: to}, pg.add)
		}
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "read the log: "+err.Error())
			return
		}
	}
	evs := pg.newestFirst()
	var out bytes.Buffer
	out.WriteString(`{"events":[`)
	out.Write(bytes.Join(evs, []byte(",")))
	fmt.Fprintf(&out, `],"lastSeq":%d,"omitted":%d}`+"\n", last, pg.omitted)
	if pg.outside >= 0 && to == last {
		s.answers.put(key, out.Bytes())
	}
	writeEvents(w, out.Bytes(), began)
}

func writeEvents(w http.ResponseWriter, body []byte, began time.Time) {
	w.Header().Set("Content-Type", "application/json")
	// The read's own time, which the page's resource timing shows beside
	// the wait for the answer.
	w.Header().Set("Server-Timing", fmt.Sprintf("read;dur=%.1f", float64(time.Since(began).Microseconds())/1000))
	w.Write(body)
}

// maxAnswer bounds the answer an answerCache keeps.
const maxAnswer = 4 << 20

// answerCache keeps the last answer to a first read, the newest window of
// the log with outside=K, which every navigation of the page asks for: the
// events of a window of seqs never change once appended, so while the
// log's last seq is the same the answer is too, and a page loaded again
// gets it without a read of the store. An event appended changes the
// last seq, so a read after it misses.
type answerCache struct {
	mu   sync.Mutex
	key  answerKey
	body []byte
}

// answerKey is what an answer depends on: the window, the log's last seq
// (the answer's lastSeq), and how many events outside run loops it holds.
type answerKey struct {
	from, to, last uint64
	outside        int
}

func (c *answerCache) get(k answerKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.body, c.body != nil && c.key == k
}

func (c *answerCache) put(k answerKey, body []byte) {
	if len(body) > maxAnswer {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.key, c.body = k, body
}

// eventPage collects the events of a read in JSON: each as it comes, but
// the events outside run loops, when their number is bounded, are held
// (their newest outside) and rendered at the end, so those the bound
// leaves out cost a copy, not an encoding.
type eventPage struct {
	outside int // at most this many events outside run loops; -1 every one
	inside  []seqJSON
	ring    []abi.Event // the newest outside events, oldest at next once full
	next    int
	omitted int
}

type seqJSON struct {
	seq  uint64
	json []byte
}

// outsideRuns reports whether no run loop holds ev: it is not the
// kernel's or an agent's (kairo.>) and names no correlation chain.
func outsideRuns(ev *abi.Event) bool {
	return ev.CorrelationID == "" && !strings.HasPrefix(ev.Type, "kairo.")
}

func (p *eventPage) add(ev *abi.Event) error {
	if p.outside < 0 || !outsideRuns(ev) {
		p.inside = append(p.inside, seqJSON{ev.Seq, jsonview.EventObject(ev)})
		return nil
	}
	if p.outside == 0 {
		p.omitted++
		return nil
	}
	// ev and the bytes it points to are the store's only until add
	// returns: a slot holds a copy, its data in a buffer it reuses.
	if len(p.ring) < p.outside {
		p.ring = append(p.ring, abi.Event{})
	} else {
		p.omitted++
	}
	slot := &p.ring[p.next]
	*slot = abi.Event{
		ID: strings.Clone(ev.ID), Type: strings.Clone(ev.Type), Source: strings.Clone(ev.Source), Time: ev.Time,
		Data: append(slot.Data[:0], ev.Data...), CausationID: strings.Clone(ev.CausationID), Seq: ev.Seq, Host: strings.Clone(ev.Host),
	}
	p.next = (p.next + 1) % p.outside
	return nil
}

func (p *eventPage) reset() {
	p.inside, p.ring, p.next, p.omitted = p.inside[:0], p.ring[:0], 0, 0
}

// newestFirst is the page's events in JSON, newest first.
func (p *eventPage) newestFirst() [][]byte {
	held := p.ring
	if len(p.ring) == p.outside {
		held = append(p.ring[p.next:len(p.ring):len(p.ring)], p.ring[:p.next]...)
	}
	out := make([][]byte, 0, len(p.inside)+len(held))
	i, j := len(p.inside)-1, len(held)-1
	for i >= 0 || j >= 0 {
		if j < 0 || i >= 0 && p.inside[i].seq > held[j].Seq {
			out = append(out, p.inside[i].json)
			i--
		} else {
			out = append(out, jsonview.EventObject(&held[j]))
			j--
		}
	}
	return out
}

// send publishes a user message, as `kairo send` does: to the agent it
// names, else to the one its text names ("@ops ..."), else to the
// default agent.
func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Text      string `json:"text"`
		RunLoopID string `json:"runLoopId"`
		Agent     string `json:"agent"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	if strings.TrimSpace(body.Text) == "" {
		writeError(w, http.StatusBadRequest, `the message is empty: send {"text": "..."}`)
		return
	}
	id := abi.NewID()
	data, err := msgpack.Marshal(abi.UserMessage{Text: body.Text, MessageID: id, RunLoopID: body.RunLoopID, Agent: body.Agent})
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	var res abi.PublishResult
	params := abi.PublishParams{Event: abi.Event{Type: abi.SubjectUserMessage, Data: data}}
	if err := s.call(r.Context(), s.sess, abi.MethodEventsPublish, params, &res); err != nil {
		writeCallError(w, abi.MethodEventsPublish, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		ID        string `json:"id"`
		Seq       uint64 `json:"seq"`
		MessageID string `json:"messageId"`
	}{res.ID, res.Seq, id})
}

// cancelRun cancels a run loop and ends its processes, as intent.cancel.
func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	var body struct {
		RunLoopID string `json:"runLoopId"`
		Reason    string `json:"reason"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	if body.RunLoopID == "" {
		writeError(w, http.StatusBadRequest, `runLoopId is empty: send {"runLoopId": "..."}, the run loop's id (its kairo.intent.started event has it)`)
		return
	}
	var res abi.CancelResult
	if err := s.call(r.Context(), s.sess, abi.MethodIntentCancel, abi.CancelParams{CorrelationID: body.RunLoopID, Reason: body.Reason}, &res); err != nil {
		writeCallError(w, abi.MethodIntentCancel, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		ProcessIDs []string `json:"processIds"`
	}{jsonview.OrEmpty(res.ProcessIDs)})
}

// kill signals a process and its tree, as `kairo kill` does: it attaches
// first, which lets it steer a process of another client of the user, for
// the length of the request.
func (s *Server) kill(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ProcessID string `json:"processId"`
		Signal    string `json:"signal"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	if body.ProcessID == "" {
		writeError(w, http.StatusBadRequest, `processId is empty: send {"processId": "p3", "signal": "TERM"}`)
		return
	}
	if body.Signal == "" {
		body.Signal = "KILL"
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel() // ends the attachment
	sess := newSession(ctx)
	var info abi.ProcessInfo
	if err := s.call(ctx, sess, abi.MethodProcessAttach, abi.ProcessRef{ProcessID: body.ProcessID}, &info); err != nil {
		writeCallError(w, abi.MethodProcessAttach, err)
		return
	}
	if info.Status != abi.ProcessRunning {
		writeError(w, http.StatusConflict, fmt.Sprintf("nothing to signal: process %s is %s", info.ID, info.Status))
		return
	}
	if err := s.call(ctx, sess, abi.MethodProcessSignal, abi.SignalParams{ProcessID: body.ProcessID, Signal: body.Signal}, &info); err != nil {
		writeCallError(w, abi.MethodProcessSignal, err)
		return
	}
	writeJSON(w, http.StatusOK, processJSON{ProcessID: info.ID, PID: info.PID, Status: info.Status, ExitCode: info.ExitCode, Signal: info.Signal})
}

// processJSON is how a process stands after /api/kill.
type processJSON struct {
	ProcessID string `json:"processId"`
	PID       int    `json:"pid"`
	Status    string `json:"status"`
	ExitCode  *int   `json:"exitCode"`
	Signal    string `json:"signal"`
}

// plugins answers what `kairo plugins --json` prints, as one list.
func (s *Server) plugins(w http.ResponseWriter, r *http.Request) {
	serveList(s, w, r, abi.MethodPluginsList, "plugins", func(res abi.PluginsListResult) []jsonview.Plugin {
		return jsonview.Each(res.Plugins, jsonview.NewPlugin)
	})
}

// agents answers what `kairo agents --json` prints, as one list: the
// agents, the default one first.
func (s *Server) agents(w http.ResponseWriter, r *http.Request) {
	serveList(s, w, r, abi.MethodAgentList, "agents", func(res abi.AgentsResult) []jsonview.Agent {
		return jsonview.Each(res.Agents, jsonview.NewAgent)
	})
}

// tools answers what `kairo tools --json` prints, as one list.
func (s *Server) tools(w http.ResponseWriter, r *http.Request) {
	serveList(s, w, r, abi.MethodToolsList, "tools", func(res abi.ToolsListResult) []jsonview.Tool {
		offered := jsonview.OfferedNames(res.Tools)
		return jsonview.Each(res.Tools, func(t abi.ToolInfo) jsonview.Tool { return jsonview.NewTool(t, offered[t.Name]) })
	})
}

// serveList calls method, which takes no params, and answers its result R
// as {key: [...]}, each item in the JSON form the CLI's --json prints.
func serveList[R, T any](s *Server, w http.ResponseWriter, r *http.Request, method, key string, items func(R) []T) {
	var res R
	if err := s.call(r.Context(), s.sess, method, nil, &res); err != nil {
		writeCallError(w, method, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string][]T{key: items(res)})
}

// status answers what `kairo status --json` prints; homeFrom is "daemon".
func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	var in abi.IntrospectResult
	var m abi.Metrics
	var ping abi.PingResult
	for _, c := range []struct {
		method string
		result any
	}{{abi.MethodKernelIntrospect, &in}, {abi.MethodSystemMetrics, &m}, {abi.MethodKernelPing, &ping}} {
		if err := s.call(r.Context(), s.sess, c.method, nil, c.result); err != nil {
			writeCallError(w, c.method, err)
			return
		}
	}
	st := s.Stats()
	writeJSON(w, http.StatusOK, struct {
		jsonview.Status
		Console consoleJSON `json:"console"`
	}{jsonview.NewStatus(s.cfg.Home, "daemon", s.cfg.Socket, in, m, ping), consoleJSON(st)})
}

// consoleJSON is the console's own part of /api/status.
type consoleJSON struct {
	TokenlessConnections int    `json:"tokenlessConnections"`
	TokenlessClosed      uint64 `json:"tokenlessClosed"`
}

// approvals answers approval.list: the pending approvals, oldest first, or
// with ?all=1 every one the kernel keeps. Each is its wire form, the names
// of the kairo.approval.requested event's data and more: state,
// requestedAt, decided, usedBy.
func (s *Server) approvals(w http.ResponseWriter, r *http.Request) {
	all := false
	switch v := r.URL.Query().Get("all"); v {
	case "", "0", "false":
	case "1", "true":
		all = true
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("all %q: give 1 for the decided approvals too, or leave it out", v))
		return
	}
	var res abi.ApprovalListResult
	if err := s.call(r.Context(), s.sess, abi.MethodApprovalList, abi.ApprovalListParams{All: all}, &res); err != nil {
		writeCallError(w, abi.MethodApprovalList, err)
		return
	}
	list := make([]json.RawMessage, 0, len(res.Approvals))
	for _, a := range res.Approvals {
		j, err := jsonview.Approval(a)
		if err != nil {
			writeError(w, http.StatusInternalServerError, abi.MethodApprovalList+": "+err.Error())
			return
		}
		list = append(list, j)
	}
	writeJSON(w, http.StatusOK, struct {
		Approvals []json.RawMessage `json:"approvals"`
	}{list})
}

// approve decides an approval, as `kairo approve` and `kairo deny` do: it
// answers the approval as approval.decide does, with already set when it
// had been decided before (the first decision stands; this one changed
// nothing).
func (s *Server) approve(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ID       string `json:"id"`
		Approved *bool  `json:"approved"`
		Reason   string `json:"reason"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	if body.ID == "" || body.Approved == nil {
		writeError(w, http.StatusBadRequest, `send {"id": "ap-...", "approved": true or false, "reason": "..."}: the approval's id (GET /api/approvals lists them) and the decision`)
		return
	}
	var a abi.Approval
	d := abi.ApprovalDecision{ID: body.ID, Approved: *body.Approved, Reason: body.Reason}
	if err := s.call(r.Context(), s.sess, abi.MethodApprovalDecide, d, &a); err != nil {
		writeCallError(w, abi.MethodApprovalDecide, err)
		return
	}
	j, err := jsonview.Approval(a)
	if err != nil {
		writeError(w, http.StatusInternalServerError, abi.MethodApprovalDecide+": "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, j)
}
