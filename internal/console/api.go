package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

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
// sequence number of the log, which the stream follows from.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
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
	var evs [][]byte
	if to > 0 {
		from := uint64(1)
		if to > uint64(limit) {
			from = to - uint64(limit) + 1
		}
		collect := func(ev *abi.Event) error {
			evs = append(evs, jsonview.EventObject(ev))
			return nil
		}
		err := b.Replay(r.Context(), bus.Query{FromSeq: from, ToSeq: to}, collect)
		var gap *bus.GapError
		if errors.As(err, &gap) && gap.To < to {
			// A bounded store dropped the oldest: what it still holds.
			evs = evs[:0]
			err = b.Replay(r.Context(), bus.Query{FromSeq: gap.To + 1, ToSeq: to}, collect)
		}
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "read the log: "+err.Error())
			return
		}
	}
	slices.Reverse(evs)
	var out bytes.Buffer
	out.WriteString(`{"events":[`)
	out.Write(bytes.Join(evs, []byte(",")))
	fmt.Fprintf(&out, `],"lastSeq":%d}`+"\n", last)
	w.Header().Set("Content-Type", "application/json")
	w.Write(out.Bytes())
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
