package console

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The first paint is drawn by the daemon: index.html comes with the rows
// of its first read already in it (the run loops, the newest events
// outside them, the chat), so the browser paints them as it parses the
// page, without waiting for app.js, a second request, a JSON parse and
// the script's DOM building. What follows is a port of app.js's fold: the
// same events give the same markup, which the script then replaces with
// its own, built from the same read (embedded in the page as data), in
// one task, so nothing is seen to change; it holds the references it
// needs to follow the log. Where the two could differ (the time of day in
// the daemon's zone and the browser's), the script's is what stays.

// The page's bounds, app.js's MAX_OTHERS, MAX_CHAT, MAX_LINES and
// MAX_LINE.
const (
	pageOthers   = 300
	pageChat     = 200
	pageLines    = 2000
	pageLineSize = 8192
)

// firstPaint folds a read of the log, oldest first, into the page's rows.
type firstPaint struct {
	manyAgents bool
	loops      *node // #loops
	others     *node // #others
	messages   *node // #messages
	nLoops     int

	byID     map[string]*jsValue
	runs     map[string]*runLoop
	procs    map[string]*procCard
	outputs  map[string]*output
	ticks    map[string]tickRec
	tickIter map[string][]*node
	memories map[string]string
	bulk     []*jsValue
	lastSeq  float64
}

type runLoop struct {
	status, agent                                 string
	interrupted                                   bool
	iterations, calls                             int
	lastTick                                      *jsValue
	running                                       map[string]bool
	el, goalEl, statusEl, agentEl, metaEl, cancel *node
	lane, iter, sys                               *node
}

type procCard struct {
	id                         string
	loop                       *runLoop
	ended                      bool
	el, state, fill, dur, kill *node
}

type tickRec struct {
	ev     *jsValue
	memory string
}

func newFirstPaint(manyAgents bool) *firstPaint {
	return &firstPaint{
		manyAgents: manyAgents,
		loops:      el("div", ""), others: el("ol", ""), messages: el("ol", ""),
		byID: map[string]*jsValue{}, runs: map[string]*runLoop{}, procs: map[string]*procCard{},
		outputs: map[string]*output{}, ticks: map[string]tickRec{}, tickIter: map[string][]*node{},
		memories: map[string]string{},
	}
}

// foldAll is app.js's foldAll.
func (f *firstPaint) foldAll(evs []*jsValue) {
	f.bulk = f.bulk[:0]
	for _, ev := range evs {
		f.fold(ev)
	}
	tail := f.bulk
	if len(tail) > pageOthers {
		tail = tail[len(tail)-pageOthers:]
	}
	for _, ev := range tail {
		f.others.append(otherEl(ev))
	}
}

func otherEl(ev *jsValue) *node {
	kind := ev.get("type").str()
	if !ev.get("type").truthy() {
		kind = "event"
	}
	return item(ev, kind, el("span", "src", ev.get("source").str()), " ", el("span", "text", clip(ev.get("data").str(), 300)))
}

// clock is the event's local time of day, HH:MM:SS.
func clock(t *jsValue) string {
	if t.kind != 's' {
		return ""
	}
	at, err := time.Parse(time.RFC3339Nano, t.s)
	if err != nil {
		return ""
	}
	return at.Local().Format("15:04:05")
}

// human is app.js's human(ms).
func human(v *jsValue) string {
	ms := v.number()
	if !(ms >= 0) {
		return ""
	}
	return humanMS(ms)
}

func humanMS(ms float64) string {
	switch {
	case ms < 1000:
		return jsNumber(jsRound(ms)) + " ms"
	case ms < 60000:
		return strconv.FormatFloat(math.Round(ms/1000*10)/10, 'f', 1, 64) + " s"
	}
	return jsNumber(math.Floor(ms/60000)) + " min " + jsNumber(jsRound(math.Mod(ms, 60000)/1000)) + " s"
}

// jsRound is Math.round: halves up.
func jsRound(x float64) float64 { return math.Floor(x + 0.5) }

func shortID(id string) string {
	if utf16Len(id) > 8 {
		u := []rune(id) // ids are ASCII; a rune count is close enough otherwise
		return string(u[max(0, len(u)-8):])
	}
	return id
}

func item(ev *jsValue, kind string, kids ...any) *node {
	li := el("li", "ev k-"+kind, append([]any{el("span", "t", clock(ev.get("time"))), el("span", "kind", kind), " "}, kids...)...)
	li.set("data-seq", ev.get("seq").concat())
	li.set("data-type", ev.get("type").concat())
	return li
}

var (
	agentSource  = regexp.MustCompile(`^agent/`)
	agentMessage = regexp.MustCompile(`^kairo\.agent\.[^.]+\.message$`)
	systemStep   = regexp.MustCompile(`^kairo\.memory\.`)
	emptyThought = regexp.MustCompile(`^\s*(rules: \d+ action\(s\))?\s*$`)
)

func agentOf(ev *jsValue) string {
	s := ev.get("source").str()
	if agentSource.MatchString(s) {
		return s[6:]
	}
	return ""
}

func (f *firstPaint) chat(ev *jsValue, who, text string) {
	label := "agent"
	if who == "user" {
		label = "you"
	}
	if f.manyAgents {
		d := ev.get("data").object()
		if who == "user" && d.get("agent").truthy() {
			label = "you → " + d.get("agent").str()
		} else if who == "agent" && agentOf(ev) != "" {
			label = agentOf(ev)
		}
	}
	li := el("li", "msg "+who, el("span", "who", label), el("span", "msg-text", text))
	li.set("data-seq", ev.get("seq").concat())
	f.messages.append(li)
	for f.messages.elements() > pageChat {
		f.messages.removeFirst()
	}
}

func (f *firstPaint) newLoop(id string) *runLoop {
	l := &runLoop{status: "open", running: map[string]bool{}}
	l.goalEl = el("span", "goal", "(started before the events shown)")
	l.goalEl.set("elementtiming", "loop")
	l.statusEl = el("span", "status", "open")
	l.agentEl = el("span", "loop-agent", "")
	l.metaEl = el("span", "meta", "")
	l.cancel = el("button", "cancel", "cancel")
	l.cancel.set("type", "button")
	l.cancel.set("data-cancel", id)
	l.lane = el("ol", "lane")
	l.el = el("section", "loop s-open", el("header", "loop-head", l.statusEl, l.agentEl, l.goalEl, el("span", "loop-id", shortID(id)), l.metaEl, l.cancel), l.lane)
	l.el.set("data-loop", id)
	l.el.set("title", "run loop "+id)
	f.runs[id] = l
	f.loops.prepend(l.el)
	f.nLoops++
	return l
}

func (l *runLoop) setAgent(agent, asker string) {
	if agent == "" {
		return
	}
	l.agent = agent
	l.el.set("data-agent", agent)
	if asker != "" {
		agent += " · asked by " + asker
	}
	l.agentEl.text(agent)
}

func (l *runLoop) drawStatus() {
	s := l.status
	if s == "open" && l.interrupted && len(l.running) == 0 {
		s = "interrupted"
	}
	cls := "loop s-" + s
	if s == "done" && l.calls == 0 {
		cls += " conversation"
	}
	l.el.set("class", cls)
	l.statusEl.text(s)
	l.cancel.hidden(l.status != "open")
	meta := strconv.Itoa(l.iterations) + " iterations"
	if l.iterations == 1 {
		meta = "1 iteration"
	}
	if len(l.running) > 0 {
		meta += " · " + strconv.Itoa(len(l.running)) + " running"
	}
	l.metaEl.text(meta)
}

// strictEqual is ===, for a tick number.
func strictEqual(a, b *jsValue) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case 'f':
		return a.f == b.f
	case 's':
		return a.s == b.s
	case 'b':
		return a.b == b.b
	case 0, 'n':
		return true
	}
	return a == b
}

func (f *firstPaint) iteration(l *runLoop, tick *jsValue, source string) *node {
	if !tick.isNullish() && (!strictEqual(l.lastTick, tick) || l.iter == nil) {
		l.lastTick = tick
		l.iterations++
		l.iter = el("ol", "items")
		l.lane.append(el("li", "iter", el("div", "iter-head", "iteration "+strconv.Itoa(l.iterations)+" · tick "+tick.concat()), l.iter))
		key := source + "#" + tick.concat()
		if rec, ok := f.ticks[key]; ok {
			l.iter.append(f.contextItem(rec))
		}
		f.tickIter[key] = append(f.tickIter[key], l.iter)
	}
	if l.iter == nil {
		l.iter = el("ol", "items")
		l.lane.append(el("li", "iter", el("div", "iter-head", "start"), l.iter))
	}
	return l.iter
}

func (f *firstPaint) contextItem(rec tickRec) *node {
	d := rec.ev.get("data").object()
	var observed []*jsValue
	if o := d.get("observed"); o.kind == 'a' {
		observed = o.arr
	}
	list := el("ol", "observed")
	for _, id := range observed {
		o := f.byID[id.str()]
		if o == nil {
			list.append(el("li", "muted", id.str()+" (not among the events loaded)"))
			continue
		}
		b := el("button", "cause", "["+o.get("seq").concat()+"] "+o.get("type").concat())
		b.set("type", "button")
		b.set("data-show", o.get("seq").concat())
		od := o.get("data").object()
		text := od.get("text")
		if !text.truthy() {
			text = od.get("name")
		}
		s := ""
		if text.truthy() {
			s = text.str()
		}
		list.append(el("li", "", b, " ", el("span", "text", clip(s, 200))))
	}
	parts := []string{strconv.Itoa(len(observed)) + " observed"}
	if r := d.get("results"); r.truthy() {
		parts = append(parts, r.concat()+" results")
	}
	if rec.memory != "" {
		parts = append(parts, "memory")
	}
	box := el("details", "context", el("summary", "", "context window: "+strings.Join(parts, ", ")), list)
	if rec.memory != "" {
		box.append(el("pre", "memory", rec.memory))
	}
	return item(rec.ev, "context", box)
}

// fold is app.js's fold for one event of a first read.
func (f *firstPaint) fold(ev *jsValue) {
	if seq := ev.get("seq").number(); !(seq > f.lastSeq) {
		return
	} else {
		f.lastSeq = seq
	}
	if id := ev.get("id"); id.truthy() {
		f.byID[id.concat()] = ev
	}
	d := ev.get("data").object()
	t := ev.get("type").str()
	if !ev.get("type").truthy() {
		t = ""
	}
	corr := ""
	if c := ev.get("correlationId"); c.truthy() {
		corr = c.concat()
	}
	if t == "kairo.agent.tick" && d.get("tick").kind != 0 {
		src := ev.get("source").str()
		if d.get("memoryChanged").truthy() {
			f.memories[src] = d.get("memory").str()
		}
		rec := tickRec{ev, f.memories[src]}
		key := src + "#" + d.get("tick").concat()
		f.ticks[key] = rec
		for _, ol := range f.tickIter[key] {
			ol.prepend(f.contextItem(rec))
		}
	}
	if t == "kairo.user.message" {
		f.chat(ev, "user", d.get("text").str())
	}
	if t == "kairo.intent.started" && d.get("runLoopId").truthy() {
		id := d.get("runLoopId").concat()
		l := f.runs[id]
		if l == nil {
			l = f.newLoop(id)
		}
		goal := d.get("goal").str()
		if goal == "" {
			l.goalEl.text("(no goal)")
		} else {
			l.goalEl.text(goal)
		}
		agent := d.get("agent").str()
		if agent == "" {
			agent = agentOf(ev)
		}
		asker := ""
		if a := d.get("ask"); a.isObject() {
			asker = a.get("agent").str()
		}
		l.setAgent(agent, asker)
		f.iteration(l, undefined, "").append(item(ev, "started", el("span", "text", goal)))
		l.drawStatus()
		return
	}
	l := f.runs[corr]
	if l == nil && corr != "" && (t == "kairo.agent.action" || t == "kairo.intent.ended" || agentMessage.MatchString(t)) {
		l = f.newLoop(corr)
	}
	if t == "kairo.intent.ended" {
		if x := f.runs[d.get("runLoopId").concat()]; x != nil && d.get("runLoopId").kind != 0 {
			l = x
		}
	}
	pid := d.get("processId").str()
	if l == nil {
		if t == "kairo.process.exited" || t == "kairo.process.canceled" || t == "kairo.process.interrupted" {
			if p := f.procs[d.get("processId").concat()]; p != nil && !p.ended {
				p.end(t[14:], "ended", d.get("durationMs"))
			}
			if t == "kairo.process.exited" {
				f.lastLines(pid, d)
			}
		}
		if t != "kairo.user.message" {
			f.bulk = append(f.bulk, ev)
		}
		return
	}
	if systemStep.MatchString(t) {
		f.systemStep(l, ev, d)
		return
	}
	if l.agent == "" && t == "kairo.agent.action" {
		l.setAgent(agentOf(ev), "")
	}
	add := func(kind string, kids ...any) {
		f.iteration(l, d.get("tick"), ev.get("source").str()).append(item(ev, kind, kids...))
	}
	switch {
	case agentMessage.MatchString(t):
		add("message", el("span", "text user", d.get("text").str()))
	case t == "kairo.agent.action":
		switch ty := d.get("type").str(); ty {
		case "say", "query":
			kind := "says"
			if ty == "query" {
				kind = "asks"
			}
			add(kind, el("span", "text reply", d.get("text").str()))
			f.chat(ev, "agent", d.get("text").str())
		case "tool_call":
			l.interrupted = false
			l.calls++
			add("tool call", el("span", "tool", d.get("tool").str()), " ", el("code", "args", clip(d.get("args").str(), 400)))
		case "cancel":
			keep := ""
			if d.get("keep").truthy() {
				keep = " (keeps the run loop)"
			}
			add("cancel", el("span", "text", d.get("reason").str()+keep))
		default:
			if ty == "" {
				ty = "action"
			}
			add(ty)
		}
	case t == "kairo.agent.thought":
		if !emptyThought.MatchString(d.get("text").str()) {
			add("thought", el("span", "text thought", d.get("text").str()))
		}
	case t == "kairo.agent.tick":
		obs := 0
		if o := d.get("observed"); o.kind == 'a' {
			obs = len(o.arr)
		}
		s := strconv.Itoa(obs) + " observed"
		if r := d.get("results"); r.truthy() {
			s += ", " + r.concat() + " results"
		}
		kids := []any{el("span", "text", s)}
		if d.get("memoryChanged").truthy() && d.get("memory").truthy() {
			kids = append(kids, el("details", "memory", el("summary", "", "memory shown"), el("pre", "", d.get("memory").str())))
		}
		add("tick", kids...)
	case t == "kairo.agent.error":
		msg := d
		for _, k := range []string{"error", "text", "message"} {
			if v := d.get(k); v.truthy() {
				msg = v
				break
			}
		}
		add("error", el("span", "text error", msg.str()))
	case t == "kairo.agent.note":
		parts := []string{d.get("status").str()}
		if e := d.get("exitCode"); !e.isNullish() {
			parts = append(parts, "exit "+e.concat())
		}
		if du := d.get("duration"); du.truthy() {
			parts = append(parts, humanOf(du.number()/1e6))
		}
		text := strings.Join(parts, " · ")
		if d.get("text").truthy() {
			text += " — " + d.get("text").str()
		}
		kids := []any{el("span", "text", text)}
		if ll := d.get("lastLines"); ll.kind == 'a' && len(ll.arr) > 0 {
			o := newOutput()
			lines := make([]string, len(ll.arr))
			for i, x := range ll.arr {
				lines[i] = x.str()
			}
			o.write(strings.Join(lines, "\n"), "stdout")
			kids = append(kids, el("details", "last", el("summary", "", "last lines"), o.pre))
		}
		add("note", kids...)
	case t == "kairo.tool.invoke":
		add("invoke", el("span", "tool", d.get("tool").str()))
	case t == "kairo.tool.result":
		if d.get("status").str() == "interrupted" {
			l.interrupted = true
		}
		add("result", f.resultView(d)...)
	case t == "kairo.process.spawned":
		add("spawned", el("span", "text", "pid "+d.get("pid").str()), f.procBlock(l, d))
	case t == "kairo.process.exited":
		p := f.procs[d.get("processId").concat()]
		how := "killed by " + d.get("signal").str()
		if e := d.get("exitCode"); !e.isNullish() {
			how = "exit " + e.concat()
		}
		reason := ""
		if d.get("reason").truthy() {
			reason = d.get("reason").str()
		}
		if p != nil {
			cls, s := "failed", how
			if e := d.get("exitCode"); e.kind == 'f' && e.f == 0 {
				cls = "ok"
			}
			if reason != "" {
				s += " (" + reason + ")"
			}
			p.end(s, cls, d.get("durationMs"))
		}
		f.lastLines(pid, d)
		text := how + " after " + human(d.get("durationMs"))
		if reason != "" {
			text += " — " + reason
		}
		add("exited", el("span", "text", text))
	case t == "kairo.process.canceled":
		add("canceled", el("span", "text", d.get("reason").str()))
	case t == "kairo.process.interrupted":
		l.interrupted = true
		if p := f.procs[d.get("processId").concat()]; p != nil {
			p.end("interrupted", "interrupted", &jsValue{kind: 'f', f: -1})
		}
		add("interrupted", el("span", "text", d.get("reason").str()))
	case t == "kairo.process.progress":
		add("progress", el("span", "text", clip(d.get("values").str(), 200)))
	case t == "kairo.approval.requested":
		add("approval", el("span", "tool", d.get("tool").str()), " ", el("span", "text", d.get("reason").str()))
	case t == "kairo.approval.decided":
		kind := "denied"
		if d.get("approved").truthy() {
			kind = "approved"
		}
		s := "by " + d.get("by").str()
		if d.get("reason").truthy() {
			s += ": " + d.get("reason").str()
		}
		add(kind, el("span", "text", s))
	case t == "kairo.sandbox.denied":
		n := ""
		if c := d.get("count").number(); c > 1 {
			n = " (" + jsNumber(c) + " times)"
		}
		s := d.get("op").str() + " " + d.get("object").str() + n
		if d.get("grant").truthy() {
			s += " — to allow it: " + d.get("grant").str()
		}
		add("refused", el("span", "text", s))
	case t == "kairo.intent.ended":
		l.status = d.get("status").str()
		if l.status == "" {
			l.status = "done"
		}
		s := l.status
		if d.get("summary").truthy() {
			s += " — " + d.get("summary").str()
		}
		add("ended", el("span", "text", s))
	default:
		add(strings.TrimPrefix(t, "kairo."), el("span", "text", clip(ev.get("data").str(), 300)))
	}
	l.drawStatus()
}

// humanOf is human() of a number already divided.
func humanOf(ms float64) string {
	if !(ms >= 0) {
		return ""
	}
	return humanMS(ms)
}

func (f *firstPaint) systemStep(l *runLoop, ev, d *jsValue) {
	if l.sys == nil {
		l.sys = el("ol", "sys-steps")
		l.el.append(el("div", "sys", el("div", "sys-head", "system · the runtime's steps, not the agent's"), l.sys))
	}
	var text string
	switch t := ev.get("type").str(); t {
	case "kairo.memory.indexed":
		n := d.get("segments")
		if !n.truthy() {
			n = &jsValue{kind: 'f'}
		}
		text = "indexed in long-term memory: " + jsNumber(n.number()) + " segments"
	case "kairo.memory.forgotten":
		text = "forgotten from memory"
		if d.get("by").truthy() {
			text += " by " + d.get("by").str()
		}
		for _, k := range []string{"query", "task", "anchor"} {
			if v := d.get(k); v.truthy() {
				text += ": " + v.str()
				break
			}
		}
	default:
		text = clip(ev.get("data").str(), 300)
	}
	l.sys.append(item(ev, "system", el("span", "text", text)))
}

func raw(v *jsValue) *node {
	var b strings.Builder
	v.stringify(&b, "  ", "")
	return el("details", "raw", el("summary", "", "JSON"), el("pre", "", b.String()))
}

func (f *firstPaint) resultView(d *jsValue) []any {
	st := d.get("status").str()
	kids := []any{el("span", "st st-"+st, st)}
	var p *procCard
	if d.get("processId").truthy() {
		p = f.procs[d.get("processId").str()]
	}
	switch r := d.get("result"); {
	case d.get("error").truthy():
		kids = append(kids, " ", el("span", "text error", d.get("error").str()))
	case p != nil:
		kids = append(kids, " ", el("span", "res-kind", "process"), p.el)
	case d.get("processId").truthy():
		argv := ""
		if a := r.object().get("argv"); a.kind == 'a' {
			parts := make([]string, len(a.arr))
			for i, x := range a.arr {
				parts[i] = x.str()
			}
			argv = strings.Join(parts, " ")
		}
		kids = append(kids, " ", el("span", "res-kind", "process "+d.get("processId").str()), " ", el("code", "argv", argv))
	case r.kind == 's':
		kids = append(kids, " ", el("span", "text", clip(r.s, 400)))
	case r.isObject():
		keys, vals := r.entries()
		var fs []string
		for i, k := range keys {
			if !vals[i].isObject() {
				fs = append(fs, k+": "+vals[i].str())
			}
		}
		kids = append(kids, " ", el("span", "text", clip(strings.Join(fs, " · "), 400)))
	}
	if du := d.get("duration"); du.truthy() {
		kids = append(kids, " ", el("span", "dur muted", "the call took "+humanOf(du.number()/1e6)))
	}
	if r := d.get("result"); !r.isNullish() {
		kids = append(kids, raw(r))
	}
	return kids
}

func (f *firstPaint) procBlock(l *runLoop, d *jsValue) *node {
	pid := d.get("processId").concat()
	o := f.outputs[pid]
	if o == nil {
		o = newOutput()
		f.outputs[pid] = o
	}
	p := &procCard{id: pid, loop: l}
	p.state = el("span", "pstate", "running")
	p.fill = el("div", "fill")
	p.dur = el("span", "dur", "")
	p.kill = el("button", "kill", "kill")
	p.kill.set("type", "button")
	p.kill.set("data-kill", pid)
	argv := ""
	if a := d.get("argv"); a.kind == 'a' {
		parts := make([]string, len(a.arr))
		for i, x := range a.arr {
			parts[i] = x.str()
		}
		argv = strings.Join(parts, " ")
	}
	p.el = el("div", "proc running",
		el("div", "proc-head", el("span", "argv", argv), el("span", "pid", "pid "+d.get("pid").str()+" · "+pid), p.state, p.kill),
		el("div", "bar", p.fill, p.dur), o.head, o.pre)
	p.el.set("data-process", pid)
	p.el.set("data-pid", d.get("pid").str())
	f.procs[pid] = p
	if l != nil {
		l.running[pid] = true
	}
	return p.el
}

// end is app.js's procEnd, but the bar's width: the page's CSP allows no
// style attribute, so the script draws it when it takes the rows over.
func (p *procCard) end(text, cls string, ms *jsValue) {
	p.ended = true
	p.state.text(text)
	p.el.set("class", "proc "+cls)
	p.kill.hidden(true)
	if m := ms.number(); m >= 0 {
		p.dur.text(humanMS(m))
	}
	if p.loop != nil {
		delete(p.loop.running, p.id)
	}
}

func (f *firstPaint) lastLines(pid string, d *jsValue) {
	o := f.outputs[pid]
	ll := d.get("lastLines")
	if o == nil || o.lines > 0 || ll.kind != 'a' || len(ll.arr) == 0 {
		return
	}
	for i, ln := range ll.arr {
		x := ln
		if !ln.isObject() {
			x = &jsValue{kind: 'o', keys: []string{"text"}, vals: []*jsValue{{kind: 's', s: ln.str()}}}
		}
		stream := "stdout"
		if x.get("stream").str() == "stderr" {
			stream = "stderr"
		}
		s := x.get("text").str()
		if i > 0 {
			s = "\n" + s
		}
		o.write(s, stream)
	}
	if n := d.get("lines").number(); n > float64(len(ll.arr)) {
		o.head.text(fmt.Sprintf("the last %d of %s lines (kairo runs show has them all)", len(ll.arr), jsNumber(n)))
	}
}
