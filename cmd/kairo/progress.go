package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
)

// This file is the one way kairo shows progress — in the up terminal's
// chat, in kairo send and in kairo runs show. A kairo.process.progress
// event carries the named groups of a skill's [[progress]] rule, as text:
// {percent: "20"}, or {step: "4", total: "20"}, and any other names the
// rule has. On a terminal, a process's progress is one line redrawn in
// place, a bar with percent, rate and ETA; piped, it is a plain line per
// event ("progress 20% (4/20)"); as JSON, the event.

// progressMode is how progress prints.
type progressMode int

const (
	progressPlain    progressMode = iota // a line per event, for pipes and files
	progressTerminal                     // one line per process, redrawn in place
	progressJSON                         // the event as one JSON object
)

// The value names that say how far along a process is.
var (
	percentKeys = []string{"percent", "pct"}
	stepKeys    = []string{"step", "current", "done", "n"}
	totalKeys   = []string{"total", "of", "max"}
)

// progressReading is what a progress event says, read for people.
type progressReading struct {
	ProcessID string
	Percent   float64  // 0 to 100; NaN when the values give none
	Step      float64  // NaN when the values give none
	Total     float64  // NaN when the values give none
	Rest      []string // the other values as name=value, sorted, escaped
	Rate      float64  // steps (or percent, without a total) per second; NaN when unknown
	ETA       time.Duration
	HasETA    bool
}

// readProgress reads a kairo.process.progress event; ok is false for any
// other event or data that is not a progress report.
func readProgress(ev *abi.Event) (progressReading, bool) {
	if ev.Type != abi.SubjectProcessProgress {
		return progressReading{}, false
	}
	var d abi.ProcessProgress
	if msgpack.Unmarshal(ev.Data, &d) != nil {
		return progressReading{}, false
	}
	r := progressReading{ProcessID: d.ProcessID, Percent: math.NaN(), Step: math.NaN(), Total: math.NaN(), Rate: math.NaN()}
	number := func(keys []string) float64 {
		for _, k := range keys {
			if v, ok := d.Values[k]; ok {
				if f, err := strconv.ParseFloat(strings.TrimSpace(fmt.Sprint(v)), 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
					return f
				}
			}
		}
		return math.NaN()
	}
	r.Percent, r.Step, r.Total = number(percentKeys), number(stepKeys), number(totalKeys)
	if math.IsNaN(r.Percent) && !math.IsNaN(r.Step) && r.Total > 0 {
		// Whole percents, down: 199 of 200 is not yet 100%.
		r.Percent = math.Floor(100 * r.Step / r.Total)
	}
	if !math.IsNaN(r.Percent) {
		r.Percent = max(0, min(100, r.Percent))
	}
	for k, v := range d.Values {
		if slices.Contains(percentKeys, k) && !math.IsNaN(r.Percent) ||
			slices.Contains(stepKeys, k) && !math.IsNaN(r.Step) ||
			slices.Contains(totalKeys, k) && !math.IsNaN(r.Total) {
			continue
		}
		r.Rest = append(r.Rest, termLine(k)+"="+termLine(fmt.Sprint(v)))
	}
	slices.Sort(r.Rest)
	return r, true
}

// counts is "(4/20)", "(4)" or "".
func (r progressReading) counts() string {
	switch {
	case math.IsNaN(r.Step):
		return ""
	case math.IsNaN(r.Total):
		return "(" + num(r.Step) + ")"
	}
	return "(" + num(r.Step) + "/" + num(r.Total) + ")"
}

// plain is the reading as a plain line: "progress 20% (4/20)".
func (r progressReading) plain() string {
	parts := []string{"progress"}
	if !math.IsNaN(r.Percent) {
		parts = append(parts, num(r.Percent)+"%")
	}
	if c := r.counts(); c != "" {
		parts = append(parts, c)
	}
	return strings.Join(append(parts, r.Rest...), " ")
}

// barWidth is the bar's width in cells, brackets excluded.
const barWidth = 20

// bar is the reading as a terminal draws it:
//
//	[####................]  20% (4/20) 2.0/s ETA 8s
func (r progressReading) bar() string {
	var parts []string
	if !math.IsNaN(r.Percent) {
		n := int(r.Percent / 100 * barWidth)
		parts = append(parts, fmt.Sprintf("[%s%s] %3.0f%%", strings.Repeat("#", n), strings.Repeat(".", barWidth-n), r.Percent))
	} else {
		parts = append(parts, "progress")
	}
	if c := r.counts(); c != "" {
		parts = append(parts, c)
	}
	if !math.IsNaN(r.Rate) {
		unit := "/s"
		if math.IsNaN(r.Step) {
			unit = "%/s"
		}
		parts = append(parts, rate(r.Rate)+unit)
	}
	if r.HasETA {
		parts = append(parts, "ETA "+eta(r.ETA))
	}
	return strings.Join(append(parts, r.Rest...), " ")
}

// num prints a count or percent without a needless fraction.
func num(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'f', 1, 64)
}

func rate(f float64) string {
	if f >= 10 {
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	return strconv.FormatFloat(f, 'f', 1, 64)
}

// eta rounds a remaining time to what a person reads: "8s", "2m05s", "1h20m".
func eta(d time.Duration) string {
	switch {
	case d < time.Second:
		return "<1s"
	case d < time.Minute:
		return strconv.Itoa(int(d.Round(time.Second)/time.Second)) + "s"
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	}
	d = d.Round(time.Minute)
	return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
}

// progressMeter follows the readings of each process over the events' own
// times, so rate and ETA come out the same live and when a run loop is
// read back.
type progressMeter struct {
	procs map[string]*progressTrack
}

type progressTrack struct {
	t0       time.Time
	x0, frac float64 // the first step (or percent) and fraction seen
}

// read reads ev and fills in its rate and ETA from the earlier readings of
// its process.
func (m *progressMeter) read(ev *abi.Event) (progressReading, bool) {
	r, ok := readProgress(ev)
	if !ok {
		return r, false
	}
	x, frac := r.Step, math.NaN()
	if math.IsNaN(x) {
		x = r.Percent
	}
	switch {
	case !math.IsNaN(r.Step) && r.Total > 0:
		frac = r.Step / r.Total
	case !math.IsNaN(r.Percent):
		frac = r.Percent / 100
	}
	if math.IsNaN(x) {
		return r, true
	}
	if m.procs == nil {
		m.procs = map[string]*progressTrack{}
	}
	t, seen := m.procs[r.ProcessID]
	// A value below the first starts the count again (a second pass).
	if !seen || x < t.x0 {
		m.procs[r.ProcessID] = &progressTrack{t0: ev.Time, x0: x, frac: frac}
		return r, true
	}
	if frac >= 1 {
		delete(m.procs, r.ProcessID) // done: the meter keeps no more of it
	}
	dt := ev.Time.Sub(t.t0).Seconds()
	if dt <= 0 || x <= t.x0 {
		return r, true
	}
	r.Rate = (x - t.x0) / dt
	if !math.IsNaN(frac) && !math.IsNaN(t.frac) && frac > t.frac && frac < 1 {
		r.ETA = time.Duration((1 - frac) / ((frac - t.frac) / dt) * float64(time.Second))
		r.HasETA = true
	}
	return r, true
}

// screen is output a person may be watching: lines, and progress that a
// terminal redraws in place. The chat's reader, its prompt and the
// daemon's warnings share one, so it is safe for concurrent use.
type screen struct {
	mu     sync.Mutex
	w      io.Writer
	mode   progressMode
	cols   int    // the terminal's width; progress lines are clipped to it
	prompt string // printed after each line, as the chat's "you> "
	meter  progressMeter
	drawn  string // the process whose progress line is just above the cursor; "" once anything else printed
}

func newScreen(w io.Writer, mode progressMode, cols int) *screen {
	if cols <= 0 {
		cols = 80
	}
	return &screen{w: w, mode: mode, cols: cols}
}

// setPrompt sets what follows each line and prints it.
func (s *screen) setPrompt(prompt string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prompt = prompt
	io.WriteString(s.w, prompt)
}

// end ends the prompt's line — on a terminal it clears it — and prints
// no prompt after.
func (s *screen) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.prompt == "":
	case s.mode == progressTerminal:
		io.WriteString(s.w, "\r\x1b[K")
	default:
		io.WriteString(s.w, "\n")
	}
	s.prompt, s.drawn = "", ""
}

// moved says the cursor left the prompt line (the user pressed Enter), so
// the next progress is drawn afresh below.
func (s *screen) moved() {
	s.mu.Lock()
	s.drawn = ""
	s.mu.Unlock()
}

// line prints text (already escaped) as lines of their own.
func (s *screen) line(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drawn = ""
	io.WriteString(s.w, s.begin()+text+"\n"+s.prompt)
}

// event prints ev as text, or as JSON in the JSON mode.
func (s *screen) event(ev *abi.Event, text string) {
	if s.mode == progressJSON {
		text = string(eventObject(ev))
	}
	s.line(text)
}

// begin is what starts a line: over the prompt, when there is one.
func (s *screen) begin() string {
	switch {
	case s.prompt == "":
		return ""
	case s.mode == progressTerminal:
		return "\r\x1b[K"
	}
	return "\r"
}

// progress prints a progress event, label first ("· ", "· [run] "); it
// reports false for an event that is not a progress report.
func (s *screen) progress(ev *abi.Event, label string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.meter.read(ev)
	if !ok {
		return false
	}
	switch s.mode {
	case progressJSON:
		io.WriteString(s.w, s.begin()+string(eventObject(ev))+"\n"+s.prompt)
	case progressPlain:
		io.WriteString(s.w, s.begin()+label+r.plain()+"\n"+s.prompt)
	case progressTerminal:
		up := ""
		if s.drawn == r.ProcessID && r.ProcessID != "" {
			up = "\x1b[1A\r\x1b[K" // back to the line drawn last time
		}
		io.WriteString(s.w, s.begin()+up+clipCells(label+r.bar(), s.cols-1)+"\n"+s.prompt)
		s.drawn = r.ProcessID
	}
	return true
}

// clipCells cuts s to n characters, an ellipsis last: a progress line must
// not wrap, or redrawing it in place would overwrite the line above.
func clipCells(s string, n int) string {
	if utf8.RuneCountInString(s) <= n || n < 1 {
		return s
	}
	rs := []rune(s)
	return string(rs[:n-1]) + "…"
}
