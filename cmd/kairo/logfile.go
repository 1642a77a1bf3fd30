package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/host/wasm"

	"github.com/kairo-os/kairo/kernel/secrets"
)

// The daemon's log goes to three places: the whole structured log to
// kairo.log in its home; to stderr as well with --log-format or -v, or
// when stderr is no terminal (systemd, a test, a pipe: whatever reads it
// reads structured lines); and on a terminal, the warnings and errors a
// person must see, one short line each, beside the chat.

// logFileMax is the size at which the daemon's log file is rotated: it
// becomes kairo.log.1 (replacing the one before) and a new file starts,
// so the log never holds more than twice this on disk.
const logFileMax = 10 << 20

// logFile is the daemon's structured log on disk, rotated at a size cap.
// A write that fails never stops the daemon: the line is lost, the first
// failure is reported once through onFail, and the next line written once
// the file works again says how many were lost.
type logFile struct {
	path   string
	max    int64
	json   bool        // the records are JSON, not text: the lost-lines note is too
	onFail func(error) // called once per run of failures, without mu held

	mu   sync.Mutex // guards the fields below and orders the writes
	f    *os.File   // nil after a failed rotation, until one succeeds
	size int64
	lost int // lines lost since the last write that succeeded
}

// openLogFile opens (appending) or creates the log file at path, mode 0600.
func openLogFile(path string, max int64, onFail func(error)) (*logFile, error) {
	l := &logFile{path: path, max: max, onFail: onFail}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *logFile) open() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.size = f, fi.Size()
	return nil
}

// Write writes one record (slog handlers write a record per call). It
// reports success whatever happens: a logger has nobody to tell.
func (l *logFile) Write(p []byte) (int, error) {
	err := l.write(p)
	if err != nil && l.onFail != nil {
		l.onFail(err)
	}
	return len(p), nil
}

// write returns the error to report: the first of a run of failures.
func (l *logFile) write(p []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil && l.size > 0 && l.size+int64(len(p)) > l.max {
		l.f.Close()
		l.f = nil
		// The one old file is replaced; a failed rename still reopens
		// (and so appends to) the file it could not move.
		os.Rename(l.path, l.path+".1")
	}
	if l.f == nil {
		if err := l.open(); err != nil {
			return l.failed(fmt.Errorf("open the log file: %w", err))
		}
	}
	if l.lost > 0 {
		note := l.lostNote()
		if n, err := l.f.Write(note); err != nil {
			l.size += int64(n)
			return l.failed(fmt.Errorf("write the log file: %w", err))
		}
		l.size += int64(len(note))
		l.lost = 0
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	if err != nil {
		return l.failed(fmt.Errorf("write the log file: %w", err))
	}
	return nil
}

// lostNote is the record that says how many lines were lost, in the
// file's format.
func (l *logFile) lostNote() []byte {
	var b bytes.Buffer
	var h slog.Handler = slog.NewTextHandler(&b, nil)
	if l.json {
		h = slog.NewJSONHandler(&b, nil)
	}
	slog.New(h).Warn("log lines were lost: the log file could not be written", "count", l.lost)
	return b.Bytes()
}

// failed counts a lost line and returns err for the first of a run.
func (l *logFile) failed(err error) error {
	l.lost++
	if l.lost > 1 {
		return nil
	}
	return err
}

// Close closes the file.
func (l *logFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// logConfig is how `kairo up` logs.
type logConfig struct {
	Level  slog.Level
	Format string   // "text" or "json" on stderr; "" for none
	File   string   // the log file; "" for none
	Human  *console // the terminal, for warnings and errors; nil for none
	// Mask masks the secrets the daemon gives in every line; nil: none.
	Mask *secrets.Masker
}

// maskedWriter writes each line a handler formats with the secrets
// masked: a log line is stored, and no value is.
type maskedWriter struct {
	w    io.Writer
	mask *secrets.Masker
}

func (m maskedWriter) Write(p []byte) (int, error) {
	if _, err := m.w.Write(m.mask.Mask(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// openLog builds the daemon's logger. A log file that cannot be opened is
// said on the terminal (or stderr), and the daemon logs without it.
func openLog(o logConfig) (*slog.Logger, *logFile) {
	var hs []slog.Handler
	ho := &slog.HandlerOptions{Level: o.Level}
	masked := func(w io.Writer) io.Writer {
		if o.Mask == nil {
			return w
		}
		return maskedWriter{w, o.Mask}
	}
	switch o.Format {
	case "text":
		hs = append(hs, slog.NewTextHandler(masked(os.Stderr), ho))
	case "json":
		hs = append(hs, slog.NewJSONHandler(masked(os.Stderr), ho))
	}
	say := func(msg string) {
		if o.Human != nil {
			o.Human.line(msg)
		} else {
			fmt.Fprintln(os.Stderr, msg)
		}
	}
	var file *logFile
	if o.File != "" {
		var err error
		file, err = openLogFile(o.File, logFileMax, func(err error) {
			say("kairo: " + termLine(err.Error()) + "; log lines are lost until it can be written")
		})
		if err != nil {
			say("kairo: cannot open the log file: " + termLine(err.Error()) + "; the daemon logs without it")
		} else if o.Format == "json" {
			file.json = true
			hs = append(hs, slog.NewJSONHandler(masked(file), ho))
		} else {
			hs = append(hs, slog.NewTextHandler(masked(file), ho))
		}
	}
	if o.Human != nil {
		hs = append(hs, &consoleHandler{c: o.Human, level: max(o.Level, slog.LevelWarn)})
	}
	return slog.New(slog.NewMultiHandler(hs...)), file
}

// newConsole is w, a terminal cols wide (80 when unknown), as a console.
func newConsole(w io.Writer, cols int) *console {
	if cols <= 0 {
		cols = 80
	}
	return &console{w: w, cols: cols}
}

// console is the terminal of `kairo up` in its human form: a status line
// redrawn while the daemon starts, then lines; once the chat runs, its
// lines go through the chat's screen, above the prompt.
type console struct {
	mu     sync.Mutex
	w      io.Writer
	cols   int
	status bool    // a status line is drawn, with no newline after it
	chat   *screen // the chat's, while it runs

	// A warning repeated (a failing tick, ten times a second) shows once
	// per repeatWindow, with how many were not shown.
	shown  map[string]time.Time
	hidden map[string]int
}

// repeatWindow is how long the console stays quiet about a warning it
// has shown.
const repeatWindow = time.Minute

// setStatus draws s as the status line, over the last one.
func (c *console) setStatus(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.chat != nil {
		return
	}
	io.WriteString(c.w, "\r\x1b[K"+clipCells(s, c.cols-1))
	c.status = true
}

// line prints s (escaped) as a line of its own, over the status line.
func (c *console) line(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.print(s)
}

// repeated prints s unless a line of the same key printed within
// repeatWindow; then it counts it, and says the count the next time.
func (c *console) repeated(key, s string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shown == nil || len(c.shown) > 1000 { // bounded: forgetting shows one again
		c.shown, c.hidden = map[string]time.Time{}, map[string]int{}
	}
	if t, ok := c.shown[key]; ok && now.Sub(t) < repeatWindow {
		c.hidden[key]++
		return
	}
	if n := c.hidden[key]; n > 0 {
		s += fmt.Sprintf(" [%d more like it since, in the log]", n)
	}
	c.shown[key], c.hidden[key] = now, 0
	c.print(s)
}

func (c *console) print(s string) {
	if c.chat != nil {
		c.chat.line(s)
		return
	}
	if c.status {
		io.WriteString(c.w, "\r\x1b[K")
		c.status = false
	}
	io.WriteString(c.w, s+"\n")
}

// attach sends the lines to the chat's screen; nil sends them back to w.
func (c *console) attach(s *screen) {
	c.mu.Lock()
	c.chat = s
	c.mu.Unlock()
}

// consoleHandler shows warnings and errors on the console, one short line
// each: the message and its attributes, clipped to the terminal's width.
// The log file has them whole.
type consoleHandler struct {
	c      *console
	level  slog.Level // warnings, or only errors when log.level says so
	attrs  []slog.Attr
	prefix string // the groups, "g1.g2."
}

func (h *consoleHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *consoleHandler) Handle(_ context.Context, r slog.Record) error {
	msg := "kairo: " + r.Message
	if r.Level >= slog.LevelError {
		msg = "kairo: error: " + r.Message
	}
	msg = termLine(msg)
	// Repeats are told apart by their words, not their numbers (a tick's).
	key := r.Level.String() + " " + r.Message
	var attrs []string
	add := func(prefix string, a slog.Attr) {
		v := a.Value.Resolve()
		if a.Key == "" || v.Kind() == slog.KindGroup {
			return // groups are the log file's to show
		}
		attrs = append(attrs, prefix+a.Key+"="+clipCells(v.String(), 60))
		if v.Kind() == slog.KindString || v.Kind() == slog.KindAny {
			key += " " + prefix + a.Key + "=" + v.String()
		}
	}
	for _, a := range h.attrs {
		add("", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		add(h.prefix, a)
		return true
	})
	// The message stays whole; the attributes get what room is left of
	// the terminal's width, if any worth having.
	line := msg
	if room := h.c.cols - 1 - utf8.RuneCountInString(msg); len(attrs) > 0 && room >= 12 {
		line += clipCells(termLine(" ("+strings.Join(attrs, ", ")+")"), room)
	}
	h.c.repeated(key, line, r.Time)
	return nil
}

func (h *consoleHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *h
	for _, a := range as {
		a.Key = h.prefix + a.Key
		n.attrs = append(slices.Clip(n.attrs), a)
	}
	return &n
}

func (h *consoleHandler) WithGroup(name string) slog.Handler {
	n := *h
	n.prefix += name + "."
	return &n
}

// clearStatus clears the status line, if one is drawn; a nil console has
// none.
func (c *console) clearStatus() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status {
		io.WriteString(c.w, "\r\x1b[K")
		c.status = false
	}
}

// pluginsStatus is the status line while the plugins load: "compiling"
// when the compilation cache is empty, as on a first start, which takes
// seconds.
func pluginsStatus(folders []wasm.Folder, cache string) string {
	n := 0
	for _, f := range folders {
		if m, err := filepath.Glob(filepath.Join(f.Path, "*.wasm")); err == nil {
			n += len(m)
		}
	}
	if n == 0 {
		return "kairo: starting…"
	}
	verb := "compiling"
	// Any file in this wazero's folder of a cache the host will use means
	// an earlier start compiled them (the built-ins at least, which every
	// home of the user shares).
	errFound := errors.New("found")
	if wasm.CheckCache(cache) == nil && filepath.WalkDir(wasm.CacheFolder(cache), func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			return errFound
		}
		return nil
	}) == errFound {
		verb = "loading"
	}
	return fmt.Sprintf("kairo: %s %s…", verb, plural(n, "plugin"))
}

// upLine is the line that says the daemon is up, on a terminal:
//
//	kairo is up in 0.3 s — home .kairo, 5 plugins, log .kairo/kairo.log
func upLine(started time.Time, home, logPath string, logging bool, list []abi.PluginStatus) string {
	running, total := 0, len(list)
	for _, p := range list {
		if p.State == abi.PluginRunning {
			running++
		}
	}
	plugins := plural(total, "plugin")
	if running < total {
		plugins = fmt.Sprintf("%d of %s running", running, plugins)
	}
	log := "log " + shortPath(logPath)
	if !logging {
		log = "no log file"
	}
	return fmt.Sprintf("kairo is up in %.1f s — home %s, %s, %s", time.Since(started).Seconds(), termLine(shortPath(home)), plugins, termLine(log))
}

// shortPath is path relative to the working folder when it is under it.
func shortPath(path string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, path); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return rel
		}
	}
	return path
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
