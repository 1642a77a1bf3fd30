// Kairo's console: the agent's run loops, rebuilt from the event log alone.
//
// The page reads the newest events (GET /api/events, newest first, bounded),
// folds them oldest first into run loops, then follows the log live
// (GET /api/stream, Server-Sent Events) from the last seq it holds. What it
// shows is a fold of the events, as internal/agent/state.go folds them:
// a run loop is a correlation chain, its id the correlationId of its
// events. Every string that came from an event reaches the DOM through
// textContent, never as HTML: the page builds its elements itself.
"use strict";

(() => {
  performance.mark("kairo:script"); // when the script began to run (BenchmarkConsoleFirstPaint)
  // Events read for the first paint, and per "load older": the server's
  // most (MaxEventsLimit), so that a run loop among many other events
  // is still in the first read. The first read asks only for the newest
  // MAX_OTHERS of the events outside run loops, which are all the page
  // draws of them; the rest of them follow after the paint (rest).
  // index.html preloads the first read: its address is this one's.
  const FIRST_PAINT = 10000;
  const PAGE = 10000;
  const MAX_LINES = 2000; // lines of output kept per process
  const MAX_LINE = 8192; // characters per line before it wraps
  const MAX_OTHERS = 300; // events outside run loops kept in the DOM
  const MAX_CHAT = 200;
  const MAX_HELD = 50000; // events held for their envelopes and causes
  const MAX_TICKS = 5000; // context windows held
  const MAX_PAINT_WAIT = 2000; // ms the page waits for its first paint before the rest

  const $ = (id) => document.getElementById(id);

  // el builds an element: class names, then children (strings become
  // text, without terminal escapes and control characters: an answer
  // that quotes a process's output quotes its escapes too).
  function el(tag, cls, ...kids) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    for (const k of kids) {
      if (k === null || k === undefined) continue;
      e.append(typeof k === "string" ? document.createTextNode(CONTROL.test(k) ? k.replace(ESC_STRIP, "") : k) : k);
    }
    return e;
  }

  const str = (v) => (typeof v === "string" ? v : v === undefined || v === null ? "" : JSON.stringify(v));
  const shortId = (id) => (id && id.length > 8 ? id.slice(-8) : id || "");
  const pad = (n) => (n < 10 ? "0" : "") + n;
  // clock is an event's local time of day (toLocaleTimeString is many times
  // slower, which a first paint of thousands of events feels).
  const clock = (t) => {
    const d = new Date(t);
    return isNaN(d) ? "" : pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  };
  function human(ms) {
    if (!(ms >= 0)) return "";
    if (ms < 1000) return Math.round(ms) + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
    return Math.floor(ms / 60000) + " min " + Math.round((ms % 60000) / 1000) + " s";
  }
  const clip = (s, n) => (s.length > n ? s.slice(0, n) + "…" : s);

  // ---- ANSI: SGR codes become classes; every other escape is dropped ----

  const ESC_RE =
    /\x1b\[([0-?]*)[ -/]*([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_][^\x1b]*\x1b\\|\x1b[ -/]*[0-~]|[\x00-\x08\x0b-\x1f\x7f]/g;
  const CONTROL = /[\x00-\x08\x0b-\x1f\x7f]/;
  const ESC_STRIP = new RegExp(ESC_RE.source, "g"); // ESC_RE's own lastIndex is Output.write's
  const ESC_WHOLE =
    /^(?:\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_][^\x1b]*\x1b\\|\x1b[ -/]*[0-~])/;

  function sgr(st, params) {
    const p = params === "" ? [0] : params.split(/[;:]/).map((x) => (x === "" ? 0 : parseInt(x, 10)));
    for (let i = 0; i < p.length; i++) {
      const n = p[i];
      if (n === 0) Object.assign(st, { fg: -1, bg: -1, b: false, d: false, i: false, u: false, inv: false });
      else if (n === 1) st.b = true;
      else if (n === 2) st.d = true;
      else if (n === 3) st.i = true;
      else if (n === 4) st.u = true;
      else if (n === 7) st.inv = true;
      else if (n === 22) st.b = st.d = false;
      else if (n === 23) st.i = false;
      else if (n === 24) st.u = false;
      else if (n === 27) st.inv = false;
      else if (n >= 30 && n <= 37) st.fg = n - 30;
      else if (n >= 90 && n <= 97) st.fg = n - 90 + 8;
      else if (n === 39) st.fg = -1;
      else if (n >= 40 && n <= 47) st.bg = n - 40;
      else if (n >= 100 && n <= 107) st.bg = n - 100 + 8;
      else if (n === 49) st.bg = -1;
      else if (n === 38 || n === 48) {
        // 256 colours: the first 16 as classes; others, and RGB, as default.
        let c = -1;
        if (p[i + 1] === 5) {
          c = p[i + 2] < 16 ? p[i + 2] : -1;
          i += 2;
        } else if (p[i + 1] === 2) i += 4;
        if (n === 38) st.fg = c;
        else st.bg = c;
      }
    }
    const cls = [];
    if (st.fg >= 0) cls.push("a-fg" + st.fg);
    if (st.bg >= 0) cls.push("a-bg" + st.bg);
    if (st.b) cls.push("a-b");
    if (st.d) cls.push("a-d");
    if (st.i) cls.push("a-i");
    if (st.u) cls.push("a-u");
    if (st.inv) cls.push("a-inv");
    st.cls = cls.join(" ");
  }

  // Output is one process's stdout and stderr as lines of spans, its tail
  // kept: at most MAX_LINES lines.
  class Output {
    constructor() {
      this.pre = el("pre", "out");
      this.head = el("div", "out-head");
      this.lines = 0;
      this.dropped = 0;
      this.cur = null;
      this.curLen = 0;
      this.pending = { stdout: "", stderr: "" };
      this.st = { fg: -1, bg: -1, b: false, d: false, i: false, u: false, inv: false, cls: "" };
    }
    newLine() {
      this.cur = el("div", "ln");
      this.curLen = 0;
      this.pre.append(this.cur);
      if (++this.lines > MAX_LINES) {
        this.pre.firstChild.remove();
        this.lines--;
        this.dropped++;
        this.head.textContent = this.dropped + " earlier lines not kept";
      }
    }
    text(s, stream) {
      const parts = s.split("\n");
      for (let j = 0; j < parts.length; j++) {
        if (j > 0 || !this.cur) this.newLine();
        let t = parts[j];
        while (t.length > 0) {
          if (this.curLen >= MAX_LINE) this.newLine();
          const piece = t.slice(0, MAX_LINE - this.curLen);
          t = t.slice(piece.length);
          this.curLen += piece.length;
          const cls = (this.st.cls + (stream === "stderr" ? " err" : "")).trim();
          if (cls) this.cur.append(el("span", cls, piece));
          else this.cur.append(document.createTextNode(piece));
        }
      }
    }
    write(data, stream) {
      let s = (this.pending[stream] || "") + data;
      this.pending[stream] = "";
      const at = s.lastIndexOf("\x1b");
      if (at >= 0 && !ESC_WHOLE.test(s.slice(at)) && s.length - at < 4096) {
        this.pending[stream] = s.slice(at);
        s = s.slice(0, at);
      }
      let last = 0;
      ESC_RE.lastIndex = 0;
      for (let m; (m = ESC_RE.exec(s)); ) {
        if (m.index > last) this.text(s.slice(last, m.index), stream);
        last = ESC_RE.lastIndex;
        if (m[2] === "m") sgr(this.st, m[1]);
      }
      if (last < s.length) this.text(s.slice(last), stream);
    }
  }

  // ---- the model: run loops folded from events ----

  let all = []; // every event held, by seq ascending
  let byId = new Map();
  let loops = new Map();
  let procs = new Map(); // processId → proc
  const outputs = new Map(); // processId → Output: live only, kept across rebuilds
  let lastSeq = 0;
  let othersCount = 0;
  // The context windows: each recorded tick (kairo.agent.tick) by its
  // agent and number, with the memory its policy was shown; and the lane
  // elements of the iterations each tick decided.
  let ticks = new Map();
  let tickIters = new Map();
  let memories = new Map(); // agent → the memory last recorded
  let unheld = []; // context items drawn before an event they name was held

  function reset() {
    unheld = [];
    ticks = new Map();
    tickIters = new Map();
    memories = new Map();
    all = [];
    byId = new Map();
    loops = new Map();
    procs = new Map();
    lastSeq = 0;
    othersCount = 0;
    $("loops").replaceChildren();
    $("others").replaceChildren();
    $("messages").replaceChildren();
    $("empty").hidden = false;
  }

  function output(pid) {
    let o = outputs.get(pid);
    if (!o) {
      o = new Output();
      outputs.set(pid, o);
      const box = el("div", "orphan", el("div", "muted", "process " + pid), o.head, o.pre);
      o.orphan = box;
      $("orphans").append(box);
      $("orphans").hidden = false;
    }
    return o;
  }

  // ---- the agents: several may run in one daemon ----

  let agents = []; // GET /api/agents: the default one first

  // agentOf is the agent that published ev ("agent/ops" → "ops"), or "".
  const agentOf = (ev) => (/^agent\//.test(str(ev.source)) ? str(ev.source).slice(6) : "");

  // addressed reports whether text starts with "@ID" naming an agent: it
  // goes there, whatever the send box's agent says.
  function addressed(text) {
    const m = /^@([^\s:,]+)/.exec(text.trim());
    return !!m && agents.some((a) => str(a.id) === m[1].toLowerCase());
  }

  async function loadAgents() {
    try {
      agents = list(await api("/api/agents"), "agents");
    } catch (e) {
      agents = []; // an older daemon: one agent, unnamed
    }
    document.body.classList.toggle("many-agents", agents.length > 1);
    document.body.dataset.agents = agents.length;
    const sel = $("agent");
    sel.replaceChildren(
      ...agents.map((a) => {
        const o = el("option", "", str(a.id) + (a.default ? " (default)" : ""));
        o.value = a.default ? "" : str(a.id);
        if (a.description) o.title = str(a.description);
        return o;
      }),
    );
    sel.hidden = agents.length < 2;
  }

  // setAgent labels a run loop with its agent, and the agent that asked
  // for it when it answers an ask.
  function setAgent(l, agent, asker) {
    if (!agent) return;
    l.agent = agent;
    l.el.dataset.agent = agent;
    l.agentEl.textContent = agent + (asker ? " · asked by " + asker : "");
  }

  function newLoop(id, ev) {
    const l = {
      id,
      goal: "",
      status: "open",
      interrupted: false,
      iterations: 0,
      lastTick: undefined,
      running: new Set(),
      started: ev.time,
    };
    l.goalEl = el("span", "goal", "(started before the events shown)");
    l.goalEl.setAttribute("elementtiming", "loop"); // when it was on the screen (start)
    l.statusEl = el("span", "status", "open");
    l.agentEl = el("span", "loop-agent", "");
    l.metaEl = el("span", "meta", "");
    l.cancel = el("button", "cancel", "cancel");
    l.cancel.type = "button";
    l.cancel.dataset.cancel = id;
    l.lane = el("ol", "lane");
    l.el = el(
      "section",
      "loop s-open",
      el("header", "loop-head", l.statusEl, l.agentEl, l.goalEl, el("span", "loop-id", shortId(id)), l.metaEl, l.cancel),
      l.lane,
    );
    l.el.dataset.loop = id;
    l.el.title = "run loop " + id;
    l.iter = null;
    loops.set(id, l);
    $("loops").prepend(l.el);
    $("empty").hidden = true;
    return l;
  }

  function loopStatus(l) {
    let s = l.status;
    if (s === "open" && l.interrupted && l.running.size === 0) s = "interrupted";
    // A run loop that ended done having called no tool only answered: a
    // conversation, shown in the chat and here only when asked for.
    l.el.className = "loop s-" + s + (s === "done" && !l.calls ? " conversation" : "");
    l.statusEl.textContent = s;
    l.cancel.hidden = l.status !== "open";
    l.metaEl.textContent =
      l.iterations + (l.iterations === 1 ? " iteration" : " iterations") + (l.running.size ? " · " + l.running.size + " running" : "");
  }

  // iteration returns the lane element an item of l goes to: a new one
  // when tick is a tick l has not seen.
  function iteration(l, tick, source) {
    if (tick !== undefined && tick !== null && (l.lastTick !== tick || !l.iter)) {
      l.lastTick = tick;
      l.iterations++;
      l.iter = el("ol", "items");
      l.lane.append(el("li", "iter", el("div", "iter-head", "iteration " + l.iterations + " · tick " + tick), l.iter));
      const key = source + "#" + tick;
      const rec = ticks.get(key);
      if (rec) l.iter.append(contextItem(rec));
      if (!tickIters.has(key)) tickIters.set(key, []);
      tickIters.get(key).push(l.iter);
    }
    if (!l.iter) {
      l.iter = el("ol", "items");
      l.lane.append(el("li", "iter", el("div", "iter-head", "start"), l.iter));
    }
    return l.iter;
  }

  // trim drops a map's oldest entries past MAX_TICKS.
  function trim(m) {
    if (m.size <= MAX_TICKS) return;
    for (const k of m.keys()) {
      m.delete(k);
      if (m.size <= MAX_TICKS * 0.8) break;
    }
  }

  // contextItem shows what the policy was shown at a tick: the events it
  // observed and the memory it was given. What it answered follows in the
  // iteration: the actions.
  // One that names an event not held is drawn again when the rest of the
  // first read comes (rest).
  function contextItem(rec) {
    const d = rec.ev.data || {};
    const observed = Array.isArray(d.observed) ? d.observed : [];
    const list = el("ol", "observed");
    let missing = false;
    for (const id of observed) {
      const o = byId.get(str(id));
      if (!o) {
        list.append(el("li", "muted", str(id) + " (not among the events loaded)"));
        missing = true;
        continue;
      }
      const b = el("button", "cause", "[" + o.seq + "] " + o.type);
      b.type = "button";
      b.dataset.show = o.seq;
      const od = o.data && typeof o.data === "object" ? o.data : {};
      list.append(el("li", "", b, " ", el("span", "text", clip(str(od.text || od.name || ""), 200))));
    }
    const parts = [observed.length + " observed"];
    if (d.results) parts.push(d.results + " results");
    if (rec.memory) parts.push("memory");
    const box = el("details", "context", el("summary", "", "context window: " + parts.join(", ")), list);
    if (rec.memory) box.append(el("pre", "memory", rec.memory));
    const li = item(rec.ev, "context", box);
    if (missing) unheld.push({ rec, li });
    return li;
  }

  function item(ev, kind, ...kids) {
    const li = el("li", "ev k-" + kind, el("span", "t", clock(ev.time)), el("span", "kind", kind), " ", ...kids);
    li.dataset.seq = ev.seq;
    li.dataset.type = ev.type;
    return li;
  }

  // chat adds a message to the chat panel, which follows the newest: it
  // scrolls to the bottom unless the person scrolled up to read. While a
  // read of the log is folded, foldAll scrolls once at its end.
  // With several agents, an answer is headed by the agent that gives it
  // and a message by the agent it named.
  function chat(ev, who, text) {
    let label = who === "user" ? "you" : "agent";
    if (agents.length > 1) {
      const d = ev.data && typeof ev.data === "object" ? ev.data : {};
      if (who === "user" && d.agent) label = "you → " + str(d.agent);
      else if (who === "agent") label = agentOf(ev) || label;
    }
    const li = el("li", "msg " + who, el("span", "who", label), el("span", "msg-text", text));
    li.dataset.seq = ev.seq;
    const m = $("messages");
    const follow = !bulk && m.scrollHeight - m.scrollTop - m.clientHeight < 40;
    m.append(li);
    while (m.childElementCount > MAX_CHAT) m.firstChild.remove();
    if (follow) m.scrollTop = m.scrollHeight;
  }

  // A thought says something unless it is empty or the rules policy's
  // count of its actions ("rules: 1 action(s)"), which the actions shown
  // after it say better.
  const emptyThought = (s) => /^\s*(rules: \d+ action\(s\))?\s*$/.test(s);

  // System steps are the kernel's and the runtime's work on a run loop
  // (memory indexing), not the agent's: shown apart, labelled as such.
  const isSystem = (t) => /^kairo\.memory\./.test(t);

  function systemStep(l, ev, d) {
    if (!l.sys) {
      l.sys = el("ol", "sys-steps");
      l.el.append(el("div", "sys", el("div", "sys-head", "system · the runtime's steps, not the agent's"), l.sys));
    }
    let text;
    if (ev.type === "kairo.memory.indexed") text = "indexed in long-term memory: " + Number(d.segments || 0) + " segments";
    else if (ev.type === "kairo.memory.forgotten") text = "forgotten from memory" + (d.by ? " by " + str(d.by) : "") + (d.query || d.task || d.anchor ? ": " + str(d.query || d.task || d.anchor) : "");
    else text = clip(str(ev.data), 300);
    l.sys.append(item(ev, "system", el("span", "text", text)));
  }

  // raw is the JSON of v behind a toggle.
  function raw(v) {
    return el("details", "raw", el("summary", "", "JSON"), el("pre", "", JSON.stringify(v, null, 2)));
  }

  // resultView renders a tool's result by its kind: a process (its card:
  // command, state, exit, duration, output), an error (its message), text,
  // or an object's plain fields; the JSON is behind a toggle.
  function resultView(d) {
    const st = str(d.status);
    const kids = [el("span", "st st-" + st, st)];
    const p = d.processId ? procs.get(str(d.processId)) : null;
    if (d.error) {
      kids.push(" ", el("span", "text error", str(d.error)));
    } else if (p) {
      kids.push(" ", el("span", "res-kind", "process"), p.el);
    } else if (d.processId) {
      const r = d.result && typeof d.result === "object" ? d.result : {};
      const argv = Array.isArray(r.argv) ? r.argv.map(str).join(" ") : "";
      kids.push(" ", el("span", "res-kind", "process " + str(d.processId)), " ", el("code", "argv", argv));
    } else if (typeof d.result === "string") {
      kids.push(" ", el("span", "text", clip(d.result, 400)));
    } else if (d.result && typeof d.result === "object") {
      const f = Object.entries(d.result)
        .filter(([, v]) => v === null || typeof v !== "object")
        .map(([k, v]) => k + ": " + str(v));
      kids.push(" ", el("span", "text", clip(f.join(" · "), 400)));
    }
    if (d.duration) kids.push(" ", el("span", "dur muted", "the call took " + human(d.duration / 1e6)));
    if (d.result !== undefined && d.result !== null) kids.push(raw(d.result));
    return kids;
  }

  // lastLines fills a process's output from its exit event's kept lines
  // when the page saw none of it live (it was opened after), so the
  // output stays viewable after the exit.
  function lastLines(pid, d) {
    const o = outputs.get(pid);
    if (!o || o.lines > 0 || !Array.isArray(d.lastLines) || !d.lastLines.length) return;
    d.lastLines.forEach((ln, i) => {
      const x = ln && typeof ln === "object" ? ln : { text: str(ln) };
      o.write((i ? "\n" : "") + str(x.text), str(x.stream) === "stderr" ? "stderr" : "stdout");
    });
    const n = Number(d.lines) || 0;
    if (n > d.lastLines.length) o.head.textContent = "the last " + d.lastLines.length + " of " + n + " lines (kairo runs show has them all)";
  }

  const isAgentMessage = (t) => /^kairo\.agent\.[^.]+\.message$/.test(t);

  function procBlock(l, ev, d) {
    const pid = d.processId;
    const o = output(pid);
    if (o.orphan) {
      o.orphan.remove();
      o.orphan = null;
    }
    const p = { id: pid, loop: l, ended: false };
    p.state = el("span", "pstate", "running");
    p.fill = el("div", "fill");
    p.dur = el("span", "dur", "");
    p.kill = el("button", "kill", "kill");
    p.kill.type = "button";
    p.kill.dataset.kill = pid;
    const argv = Array.isArray(d.argv) ? d.argv.map(str).join(" ") : "";
    p.el = el(
      "div",
      "proc running",
      el("div", "proc-head", el("span", "argv", argv), el("span", "pid", "pid " + str(d.pid) + " · " + pid), p.state, p.kill),
      el("div", "bar", p.fill, p.dur),
      o.head,
      o.pre,
    );
    p.el.dataset.process = pid;
    p.el.dataset.pid = str(d.pid);
    procs.set(pid, p);
    if (l) l.running.add(pid);
    return p.el;
  }

  function procEnd(p, text, cls, ms) {
    p.ended = true;
    p.state.textContent = text;
    p.el.className = "proc " + cls;
    p.kill.hidden = true;
    if (ms >= 0) {
      // A log scale: a second and an hour both stay visible.
      p.fill.style.width = Math.min(100, Math.max(1, (Math.log10(ms + 1) / Math.log10(3600001)) * 100)) + "%";
      p.dur.textContent = human(ms);
    }
    if (p.loop) p.loop.running.delete(p.id);
  }

  // fold applies one event to the model and the DOM.
  function fold(ev) {
    if (!(ev.seq > lastSeq)) return;
    lastSeq = ev.seq;
    all.push(ev);
    if (ev.id) byId.set(ev.id, ev);
    if (all.length > MAX_HELD) {
      // A page open for long keeps the newest: the DOM it drew stays.
      for (const o of all.splice(0, MAX_HELD / 5)) byId.delete(o.id);
    }
    const d = ev.data && typeof ev.data === "object" ? ev.data : {};
    const t = ev.type || "";
    const corr = ev.correlationId || "";

    if (t === "kairo.agent.tick" && d.tick !== undefined) {
      const src = str(ev.source);
      if (d.memoryChanged) memories.set(src, str(d.memory));
      const rec = { ev, memory: memories.get(src) || "" };
      const key = src + "#" + d.tick;
      ticks.set(key, rec);
      for (const ol of tickIters.get(key) || []) ol.prepend(contextItem(rec));
      trim(ticks);
      trim(tickIters);
    }

    if (t === "kairo.user.message") {
      chat(ev, "user", str(d.text));
    }
    if (t === "kairo.intent.started" && d.runLoopId) {
      const l = loops.get(d.runLoopId) || newLoop(d.runLoopId, ev);
      l.goal = str(d.goal);
      l.goalEl.textContent = l.goal || "(no goal)";
      setAgent(l, str(d.agent) || agentOf(ev), d.ask && typeof d.ask === "object" ? str(d.ask.agent) : "");
      l.started = ev.time;
      iteration(l).append(item(ev, "started", el("span", "text", l.goal)));
      loopStatus(l);
      return;
    }
    let l = loops.get(corr);
    if (!l && corr && (t === "kairo.agent.action" || t === "kairo.intent.ended" || isAgentMessage(t))) l = newLoop(corr, ev);
    if (t === "kairo.intent.ended" && loops.get(d.runLoopId)) l = loops.get(d.runLoopId);
    if (!l) {
      if (t === "kairo.process.exited" || t === "kairo.process.canceled" || t === "kairo.process.interrupted") {
        const p = procs.get(d.processId);
        if (p && !p.ended) procEnd(p, t.slice(14), "ended", d.durationMs);
        if (t === "kairo.process.exited") lastLines(str(d.processId), d);
      }
      if (t !== "kairo.user.message") other(ev);
      return;
    }
    if (isSystem(t)) {
      systemStep(l, ev, d);
      return;
    }
    // A run loop that started before the events shown is its actions' agent's.
    if (!l.agent && t === "kairo.agent.action") setAgent(l, agentOf(ev), "");
    const add = (kind, ...kids) => iteration(l, d.tick, str(ev.source)).append(item(ev, kind, ...kids));

    switch (true) {
      case isAgentMessage(t):
        add("message", el("span", "text user", str(d.text)));
        break;
      case t === "kairo.agent.action": {
        const ty = str(d.type);
        if (ty === "say" || ty === "query") {
          add(ty === "say" ? "says" : "asks", el("span", "text reply", str(d.text)));
          chat(ev, "agent", str(d.text));
        } else if (ty === "tool_call") {
          l.interrupted = false;
          l.calls = (l.calls || 0) + 1;
          add("tool call", el("span", "tool", str(d.tool)), " ", el("code", "args", clip(str(d.args), 400)));
        } else if (ty === "cancel") {
          add("cancel", el("span", "text", str(d.reason) + (d.keep ? " (keeps the run loop)" : "")));
        } else {
          add(ty || "action");
        }
        break;
      }
      case t === "kairo.agent.thought":
        if (!emptyThought(str(d.text))) add("thought", el("span", "text thought", str(d.text)));
        break;
      case t === "kairo.agent.tick": {
        const obs = Array.isArray(d.observed) ? d.observed.length : 0;
        const kids = [el("span", "text", obs + " observed" + (d.results ? ", " + d.results + " results" : ""))];
        if (d.memoryChanged && d.memory) kids.push(el("details", "memory", el("summary", "", "memory shown"), el("pre", "", str(d.memory))));
        add("tick", ...kids);
        break;
      }
      case t === "kairo.agent.error":
        add("error", el("span", "text error", str(d.error || d.text || d.message || d)));
        break;
      case t === "kairo.agent.note": {
        const parts = [str(d.status)];
        if (d.exitCode !== undefined && d.exitCode !== null) parts.push("exit " + d.exitCode);
        if (d.duration) parts.push(human(d.duration / 1e6));
        const kids = [el("span", "text", parts.join(" · ") + (d.text ? " — " + str(d.text) : ""))];
        if (Array.isArray(d.lastLines) && d.lastLines.length) {
          const o = new Output();
          o.write(d.lastLines.map(str).join("\n"), "stdout");
          kids.push(el("details", "last", el("summary", "", "last lines"), o.pre));
        }
        add("note", ...kids);
        break;
      }
      case t === "kairo.tool.invoke":
        add("invoke", el("span", "tool", str(d.tool)));
        break;
      case t === "kairo.tool.result": {
        const st = str(d.status);
        if (st === "interrupted") l.interrupted = true;
        add("result", ...resultView(d));
        break;
      }
      case t === "kairo.process.spawned":
        // The process's card moves to its tool result when that comes.
        add("spawned", el("span", "text", "pid " + str(d.pid)), procBlock(l, ev, d));
        break;
      case t === "kairo.process.exited": {
        const p = procs.get(d.processId);
        const how = d.exitCode !== undefined && d.exitCode !== null ? "exit " + d.exitCode : "killed by " + str(d.signal);
        if (p) procEnd(p, how + (d.reason ? " (" + str(d.reason) + ")" : ""), d.exitCode === 0 ? "ok" : "failed", d.durationMs);
        lastLines(str(d.processId), d);
        add("exited", el("span", "text", how + " after " + human(d.durationMs) + (d.reason ? " — " + str(d.reason) : "")));
        break;
      }
      case t === "kairo.process.canceled":
        add("canceled", el("span", "text", str(d.reason)));
        break;
      case t === "kairo.process.interrupted": {
        l.interrupted = true;
        const p = procs.get(d.processId);
        if (p) procEnd(p, "interrupted", "interrupted", -1);
        add("interrupted", el("span", "text", str(d.reason)));
        break;
      }
      case t === "kairo.process.progress":
        add("progress", el("span", "text", clip(str(d.values), 200)));
        break;
      case t === "kairo.approval.requested":
        add("approval", el("span", "tool", str(d.tool)), " ", el("span", "text", str(d.reason)));
        break;
      case t === "kairo.approval.decided":
        add(d.approved ? "approved" : "denied", el("span", "text", "by " + str(d.by) + (d.reason ? ": " + str(d.reason) : "")));
        break;
      case t === "kairo.sandbox.denied": {
        const n = Number(d.count) > 1 ? " (" + Number(d.count) + " times)" : "";
        add("refused", el("span", "text", str(d.op) + " " + str(d.object) + n + (d.grant ? " — to allow it: " + str(d.grant) : "")));
        break;
      }
      case t === "kairo.intent.ended":
        l.status = str(d.status) || "done";
        add("ended", el("span", "text", l.status + (d.summary ? " — " + str(d.summary) : "")));
        break;
      default:
        add(t.replace(/^kairo\./, ""), el("span", "text", clip(str(ev.data), 300)));
    }
    loopStatus(l);
  }

  // bulk collects the events outside run loops while a read of the log is
  // folded: only the last MAX_OTHERS of them are drawn (drawOthers).
  let bulk = null;
  const otherEl = (ev) => item(ev, ev.type || "event", el("span", "src", str(ev.source)), " ", el("span", "text", clip(str(ev.data), 300)));

  function other(ev) {
    if (bulk) {
      bulk.push(ev);
      return;
    }
    const o = $("others");
    o.append(otherEl(ev));
    if (++othersCount > MAX_OTHERS) {
      o.firstChild.remove();
      othersCount--;
    }
  }

  // foldAll folds a read of the log, oldest first. The rows of its events
  // outside run loops are drawn at once, or, with later, by the function
  // it returns: the first paint draws them after the run loops above them.
  function foldAll(evs, later) {
    bulk = [];
    for (const ev of evs) fold(ev);
    const tail = bulk.slice(-MAX_OTHERS);
    bulk = null;
    // The chat follows its newest message. Its height is read in the
    // frame, whose layout it then is, not by a layout of its own amid the
    // fold (a first paint's second).
    const m = $("messages");
    requestAnimationFrame(() => (m.scrollTop = m.scrollHeight));
    const draw = () => {
      const o = $("others");
      o.append(...tail.map(otherEl));
      othersCount = o.childElementCount;
      while (othersCount > MAX_OTHERS) {
        o.firstChild.remove();
        othersCount--;
      }
    };
    if (!later) {
      draw();
      return null;
    }
    return draw;
  }

  // ---- live: events and chunks queued, applied once a frame ----

  let queue = [];
  let frame = 0;
  function enqueue(x) {
    queue.push(x);
    if (!frame) frame = requestAnimationFrame(flush);
  }
  function flush() {
    frame = 0;
    const q = queue;
    queue = [];
    let plugins = false;
    for (const x of q) {
      if (x.chunk) {
        output(str(x.chunk.processId)).write(str(x.chunk.data), str(x.chunk.stream));
      } else {
        fold(x);
        if (/^kairo\.(plugin|mcp)\./.test(x.type || "")) plugins = true;
        if (/^kairo\.approval\./.test(x.type || "")) approvalEvent(x);
      }
    }
    document.body.dataset.lastSeq = lastSeq;
    if (plugins) panels();
  }

  let source = null;
  let retry = 0;
  function stream() {
    if (source) source.close();
    source = new EventSource("/api/stream?from=" + lastSeq);
    source.addEventListener("open", () => {
      retry = 0;
      setConn("live", "conn-live");
    });
    source.addEventListener("kairo", (m) => {
      try {
        enqueue(JSON.parse(m.data));
      } catch (e) {
        console.warn("kairo console: an event that is not JSON", e);
      }
    });
    source.addEventListener("chunk", (m) => {
      try {
        enqueue({ chunk: JSON.parse(m.data) });
      } catch (e) {
        console.warn("kairo console: a chunk that is not JSON", e);
      }
    });
    source.addEventListener("dropped", () => location.reload());
    source.addEventListener("error", () => {
      // The daemon went away (a restart): follow again from the last seq
      // held, once it answers.
      source.close();
      source = null;
      setConn("reconnecting", "conn-wait");
      setTimeout(stream, Math.min(5000, 250 * 2 ** retry++));
    });
  }

  function setConn(text, cls) {
    const c = $("conn");
    c.textContent = text;
    c.className = "conn " + cls;
  }

  // ---- requests ----

  async function api(path, body) {
    const init = body === undefined ? {} : { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
    const r = await fetch(path, init);
    if (!r.ok) {
      const text = await r.text();
      throw new Error(path + ": " + r.status + " " + text.trim());
    }
    const ct = r.headers.get("Content-Type") || "";
    return ct.includes("json") ? r.json() : r.text();
  }

  function showError(e) {
    const p = $("error");
    p.textContent = e ? String(e.message || e) : "";
    p.hidden = !e;
  }

  // loadEvents reads the window of the log before seq before (0: the
  // newest), oldest first; with outside, only that many of its events
  // outside run loops, and omitted counts the others.
  async function loadEvents(before, outside) {
    let q = "/api/events?limit=" + (before ? PAGE : FIRST_PAINT) + (before ? "&before=" + before : "");
    if (outside !== undefined) q += "&outside=" + outside;
    const r = await api(q);
    performance.mark("kairo:read");
    const evs = Array.isArray(r.events) ? r.events : [];
    return { evs: evs.reverse(), last: r.lastSeq || 0, omitted: r.omitted || 0 };
  }

  // rest reads the window of the first read again, whole, and holds the
  // events it left out: nothing of them is drawn (the newest were), but
  // an event's detail and cause, and a context window, may name them.
  async function rest(last) {
    let evs;
    try {
      ({ evs } = await loadEvents(last + 1));
    } catch (e) {
      showError(e);
      return;
    }
    const have = new Set(all.map((e) => e.seq));
    const add = evs.filter((e) => !have.has(e.seq));
    if (!add.length) return;
    for (const e of add) if (e.id && !byId.has(e.id)) byId.set(e.id, e);
    all = all.concat(add).sort((a, b) => a.seq - b.seq);
    document.body.dataset.events = all.length;
    $("older").hidden = !all.length || all[0].seq <= 1;
    const redraw = unheld;
    unheld = [];
    for (const { rec, li } of redraw) if (li.isConnected) li.replaceWith(contextItem(rec));
  }

  async function older() {
    const first = all.length ? all[0].seq : 0;
    if (first <= 1) return;
    try {
      const { evs } = await loadEvents(first);
      const keep = all;
      reset();
      foldAll(evs.concat(keep));
      $("older").hidden = !all.length || all[0].seq <= 1;
    } catch (e) {
      showError(e);
    }
  }

  function list(r, key) {
    if (Array.isArray(r)) return r;
    if (r && Array.isArray(r[key])) return r[key];
    return [];
  }

  async function panels() {
    try {
      const [pl, tl] = await Promise.all([api("/api/plugins"), api("/api/tools")]);
      const ul = $("plugins");
      ul.replaceChildren(
        ...list(pl, "plugins").map((p) => {
          const grants = [];
          for (const k of ["subscribe", "publish", "call", "services", "tools", "wasiFs", "wasiEnv"]) {
            if (Array.isArray(p[k]) && p[k].length) grants.push(k + ": " + p[k].map(str).join(", "));
          }
          const li = el(
            "li",
            "plugin p-" + str(p.state),
            el("span", "name", str(p.name)),
            " ",
            el("span", "state", str(p.state)),
            " ",
            el("span", "muted", [p.version ? "v" + str(p.version) : "", p.failures ? p.failures + " failures" : "", p.restarts ? p.restarts + " restarts" : "", p.denied ? p.denied + " denied" : ""].filter(Boolean).join(" · ")),
          );
          if (p.error) li.append(el("div", "error", str(p.error)));
          if (grants.length) li.append(el("div", "grants", grants.join("; ")));
          if (p.requested) li.append(el("div", "requested", "requested: " + str(p.requested)));
          return li;
        }),
      );
      $("tools").replaceChildren(
        ...list(tl, "tools").map((t) => {
          const li = el("li", "tool-row", el("span", "name", str(t.name)), " ", el("span", "muted", str(t.source) + (t.origin ? " · " + str(t.origin) : "")));
          if (t.description) li.title = str(t.description);
          if (t.error) li.append(el("div", "error", str(t.error)));
          return li;
        }),
      );
    } catch (e) {
      showError(e);
    }
    try {
      const s = await api("/api/status");
      const bits = [];
      if (s && typeof s === "object") {
        for (const k of ["version", "abiVersion", "ready"]) if (s[k] !== undefined) bits.push(k + " " + str(s[k]));
      }
      $("status").textContent = bits.join(" · ");
    } catch (e) {
      // The status is a nicety; the timeline does without it.
    }
  }

  // ---- approvals: what waits for the operator's yes ----
  //
  // The panel starts from GET /api/approvals (the pending ones) and follows
  // the stream's kairo.approval.* events. A decision is POST /api/approve;
  // the kernel keeps the first decision of each, so its answer says whether
  // this one counted or an earlier one stands.

  const MAX_DECIDED = 20; // decided approvals kept in the panel
  const approvals = new Map(); // id → row

  // grantLines are the manifest lines an approval's grants add, as
  // `kairo approvals` prints them.
  function grantLines(g) {
    if (!g || typeof g !== "object") return [];
    const out = [];
    const line = (table, key, quote) => {
      const l = g[key === "connect_tcp" ? "connectTcp" : key === "bind_tcp" ? "bindTcp" : key];
      if (!Array.isArray(l) || !l.length) return;
      out.push("[" + table + "] " + key + " = [" + l.map((v) => (quote ? JSON.stringify(str(v)) : String(Number(v)))).join(", ") + "]");
    };
    line("fs", "read", true);
    line("fs", "write", true);
    line("fs", "exec", true);
    line("net", "connect_tcp", false);
    line("net", "bind_tcp", false);
    line("net", "hosts", true);
    return out;
  }

  function minutes(ms) {
    if (ms < 60000) return Math.max(0, Math.floor(ms / 1000)) + " s";
    if (ms < 3600000) return Math.round(ms / 60000) + " min";
    return Math.floor(ms / 3600000) + " h " + (Math.round(ms / 60000) % 60) + " min";
  }

  function approvalRow(a) {
    const id = str(a.id);
    let row = approvals.get(id);
    if (!row) {
      row = { a: {} };
      row.tool = el("span", "tool", "");
      row.when = el("span", "ap-when muted", "");
      row.reason = el("div", "ap-reason", "");
      row.args = el("code", "args ap-args", "");
      row.meta = el("div", "ap-meta muted", "");
      row.grants = el("pre", "ap-grants", "");
      row.state = el("div", "ap-state", "");
      row.note = el("input", "ap-note");
      row.note.placeholder = "reason (optional)";
      row.note.autocomplete = "off";
      row.approve = el("button", "approve", "Approve");
      row.approve.type = "button";
      row.approve.dataset.approve = id;
      row.deny = el("button", "deny", "Deny");
      row.deny.type = "button";
      row.deny.dataset.deny = id;
      row.actions = el("div", "ap-actions", row.note, row.approve, row.deny);
      row.result = el("div", "ap-result", "");
      row.li = el(
        "li",
        "approval",
        el("div", "ap-head", row.tool, " ", el("span", "ap-id", id), " ", row.when),
        row.reason,
        row.args,
        row.meta,
        row.grants,
        row.state,
        row.actions,
        row.result,
      );
      row.li.dataset.approval = id;
      approvals.set(id, row);
      $("approvals").append(row.li);
    }
    const { already, ...rest } = a;
    Object.assign(row.a, rest);
    drawApproval(row);
    countApprovals();
    return row;
  }

  function drawApproval(row) {
    const a = row.a;
    const st = str(a.state) || "pending";
    row.li.className = "approval ap-" + st;
    row.li.dataset.state = st;
    row.tool.textContent = str(a.tool);
    row.reason.textContent = str(a.reason);
    row.args.textContent = clip(str(a.args), 300);
    row.args.hidden = !a.args;
    const meta = [];
    if (a.correlationId) meta.push("run loop " + shortId(str(a.correlationId)));
    if (a.skill) meta.push("skill " + str(a.skill));
    if (a.requester) meta.push("asked by " + str(a.requester));
    row.meta.textContent = meta.join(" · ");
    const g = grantLines(a.grants);
    row.grants.textContent = g.length ? "adds to the manifest, for one run:\n" + g.join("\n") : "";
    row.grants.hidden = !g.length;
    const d = a.decided && typeof a.decided === "object" ? a.decided : null;
    row.state.textContent = st === "pending" ? "" : st + (d ? " by " + str(d.by) + (d.reason ? ": " + str(d.reason) : "") : "");
    row.state.hidden = st === "pending";
    row.actions.hidden = st !== "pending";
    drawWhen(row);
  }

  function drawWhen(row) {
    const a = row.a;
    const now = Date.now();
    const parts = [];
    const asked = Date.parse(str(a.requestedAt));
    if (!isNaN(asked)) parts.push("asked " + minutes(now - asked) + " ago");
    const exp = Date.parse(str(a.expires));
    if (row.a.state === "pending" && !isNaN(exp)) parts.push(exp > now ? "expires in " + minutes(exp - now) : "expired");
    row.when.textContent = parts.join(" · ");
  }

  // countApprovals shows how many wait, and keeps the newest decided rows.
  function countApprovals() {
    let pending = 0;
    const decided = [];
    for (const row of approvals.values()) {
      if (row.a.state === "pending") pending++;
      else decided.push(row);
    }
    for (const row of decided.slice(0, Math.max(0, decided.length - MAX_DECIDED))) {
      row.li.remove();
      approvals.delete(str(row.a.id));
    }
    $("approvals-count").textContent = pending ? String(pending) : "";
    $("approvals-empty").hidden = pending > 0;
    document.body.dataset.approvals = pending;
  }

  // approvalEvent applies a kairo.approval event of the stream.
  function approvalEvent(ev) {
    const d = ev.data && typeof ev.data === "object" ? ev.data : {};
    const id = str(d.id);
    if (!id) return;
    const row = approvals.get(id);
    if (ev.type === "kairo.approval.requested") {
      if (!row) approvalRow(Object.assign({ state: "pending", requestedAt: ev.time }, d));
    } else if (ev.type === "kairo.approval.decided" && row && row.a.state === "pending") {
      // The first decision stands: a later event changes nothing.
      approvalRow({ id, state: d.approved ? "approved" : "denied", decided: d });
    }
  }

  async function loadApprovals() {
    try {
      const r = await api("/api/approvals");
      for (const a of list(r, "approvals")) approvalRow(a);
      countApprovals();
    } catch (e) {
      showError(e);
    }
  }

  // decide sends the operator's decision and shows what the kernel made
  // of it: this decision, or the one that stood before.
  function decide(id, approved) {
    const row = approvals.get(id);
    if (!row) return;
    const reason = row.note.value.trim();
    row.approve.disabled = row.deny.disabled = true;
    row.result.className = "ap-result";
    row.result.textContent = approved ? "approving…" : "denying…";
    api("/api/approve", { id, approved, reason }).then(
      (a) => {
        row.approve.disabled = row.deny.disabled = false;
        const d = a && a.decided && typeof a.decided === "object" ? a.decided : {};
        const what = str(a.state) + (d.by ? " by " + str(d.by) : "") + (d.reason ? ": " + str(d.reason) : "");
        if (a.already) {
          row.result.className = "ap-result already";
          row.result.textContent = "decided before: " + what + " — nothing changed";
        } else {
          row.result.className = "ap-result done";
          row.result.textContent = "your decision is recorded";
        }
        approvalRow(a);
        showError(null);
      },
      (e) => {
        row.approve.disabled = row.deny.disabled = false;
        row.result.className = "ap-result error";
        row.result.textContent = String(e.message || e);
        showError(e);
      },
    );
  }

  // ---- the detail of an event: its envelope and its cause ----

  function detail(seq) {
    const ev = all.find((e) => e.seq === seq);
    if (!ev) return;
    $("detail").hidden = false;
    $("envelope").textContent = JSON.stringify(ev, null, 2);
    const c = $("cause");
    if (!ev.causationId) {
      c.replaceChildren(el("span", "muted", "nothing: it begins its chain"));
      return;
    }
    const cause = byId.get(ev.causationId);
    if (!cause) {
      c.replaceChildren(el("span", "muted", ev.causationId + " (not among the events loaded)"));
      return;
    }
    const b = el("button", "cause", "[" + cause.seq + "] " + cause.type);
    b.type = "button";
    b.dataset.show = cause.seq;
    c.replaceChildren(b);
  }

  // ---- wiring ----

  document.addEventListener("click", (e) => {
    const t = e.target.closest("button, summary, [data-seq]");
    if (!t || t.tagName === "SUMMARY") return; // a toggle opens only itself
    if (t.dataset.approve) {
      decide(t.dataset.approve, true);
    } else if (t.dataset.deny) {
      decide(t.dataset.deny, false);
    } else if (t.dataset.cancel) {
      api("/api/cancel", { runLoopId: t.dataset.cancel }).then(() => showError(null), showError);
    } else if (t.dataset.kill) {
      api("/api/kill", { processId: t.dataset.kill, signal: "TERM" }).then(() => showError(null), showError);
    } else if (t.dataset.show) {
      detail(Number(t.dataset.show));
    } else if (t.id === "close-detail") {
      $("detail").hidden = true;
    } else if (t.id === "older") {
      older();
    } else if (t.dataset.seq) {
      detail(Number(t.dataset.seq));
    }
  });

  $("show-conv").addEventListener("change", (e) => $("timeline").classList.toggle("show-conv", e.target.checked));

  $("send").addEventListener("submit", (e) => {
    e.preventDefault();
    const input = $("text");
    const text = input.value.trim();
    if (!text) return;
    const body = { text };
    const agent = $("agent").value;
    if (agent && !addressed(text)) body.agent = agent;
    api("/api/send", body).then(() => {
      input.value = "";
      showError(null);
    }, showError);
  });

  async function start() {
    // The events are asked for at once, the agents beside them: the chat
    // names the agents when there are several, so they are folded after.
    const first = loadEvents(0, MAX_OTHERS);
    first.catch(() => {}); // awaited below
    await loadAgents();
    let omitted = 0;
    let windowEnd = 0;
    let others = null;
    try {
      const r = await first;
      others = foldAll(r.evs, true);
      performance.mark("kairo:folded");
      windowEnd = r.last;
      omitted = r.omitted;
      if (r.last > lastSeq) lastSeq = r.last;
      $("older").hidden = !all.length || all[0].seq <= 1;
    } catch (e) {
      showError(e);
    }
    // ready: the first paint's DOM is built; painted: ms from the
    // navigation's start to the first run loop's header on the screen
    // (Element Timing: the frame presented, not only its main-thread
    // part), or, with none to show, to just after the frame that drew the
    // fold. The rows of other events are below the run loops: with a run
    // loop to show, they are drawn once it is on the screen, and the first
    // frame styles, lays out, paints and rasters the run loops alone.
    const shown = shownLoop();
    const byHeader = !!shown && document.visibilityState !== "hidden" && (PerformanceObserver.supportedEntryTypes || []).includes("element");
    if (others && !byHeader) others();
    document.body.dataset.lastSeq = lastSeq;
    document.body.dataset.events = all.length;
    document.body.dataset.ready = "1";
    await firstPaint(byHeader);
    if (others && byHeader) others();
    // What the first screen does not need waits for it to be on the
    // screen: asked for before, its requests and their answers took the
    // CPU the daemon, the compositor and the raster needed for the frame.
    // The approvals after the events, before the stream: what is decided
    // meanwhile comes on the stream, from the last seq read.
    await loadApprovals();
    document.body.dataset.approvalsLoaded = "1";
    stream();
    panels();
    setInterval(() => approvals.forEach(drawWhen), 15000);
    if (omitted) await rest(windowEnd);
    document.body.dataset.held = "1";
  }

  // shownLoop is the newest run loop the timeline shows, if any.
  const shownLoop = () => document.querySelector("#timeline.show-conv .loop, .loop:not(.conversation)");

  // firstPaint resolves once the fold is on the screen and marks when, in
  // document.body.dataset.painted: with byHeader, by the Element Timing of
  // the newest run loop's header (its frame presented), else after the
  // frame that drew the fold. A hidden tab draws no frame: it resolves at
  // once if the tab is hidden, after MAX_PAINT_WAIT if the paint has not
  // come by then; the page goes on, and the mark is made when the paint
  // comes.
  function firstPaint(byHeader) {
    return new Promise((done) => {
      setTimeout(done, document.visibilityState === "hidden" ? 0 : MAX_PAINT_WAIT);
      if (!byHeader) {
        requestAnimationFrame(() =>
          setTimeout(() => {
            document.body.dataset.painted = performance.now().toFixed(1);
            done();
          }),
        );
        return;
      }
      const obs = new PerformanceObserver((list) => {
        const e = list.getEntries().find((e) => e.identifier === "loop");
        if (!e) return;
        obs.disconnect();
        document.body.dataset.painted = (e.renderTime || e.loadTime).toFixed(1);
        done();
      });
      obs.observe({ type: "element", buffered: true });
    });
  }

  document.addEventListener("securitypolicyviolation", (e) => {
    console.error("kairo console: CSP violation: " + e.violatedDirective + " " + e.blockedURI);
  });

  start();
})();
