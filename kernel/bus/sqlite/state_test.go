package sqlite

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kairo-os/kairo/internal/testkit"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"

	"github.com/kairo-os/kairo/abi"
)

// fillStore appends n events to the store at path, in batches, and closes
// it cleanly unless keepOpen.
func fillStore(t *testing.T, path string, n int) {
	t.Helper()
	s := openSQLite(t, path)
	bustest.AppendN(t, s, 0, n)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// refused opens path, wants ErrDamaged with each of want in its text, and
// returns the text.
func refused(t *testing.T, path string, want ...string) string {
	t.Helper()
	s, err := Open(path, Config{})
	if err == nil {
		s.Close()
		t.Fatalf("OpenSQLite(%s) opened a damaged store", path)
	}
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("OpenSQLite(%s): %v; want ErrDamaged", path, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal %q does not say %q", err, w)
		}
	}
	return err.Error()
}

// A store closed cleanly opens again where it was (the control of every
// refusal below), and one truncated to 0 bytes or removed — the classic
// outcomes of a crash or a slip — is refused, where it used to start with
// an empty log and give sequence numbers 1, 2, 3 again. A new home's empty
// file is not a loss.
func TestStoreLostFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	fillStore(t, path, 300)
	s := openSQLite(t, path)
	if got := s.LastSeq(); got != 300 {
		t.Fatalf("LastSeq after a clean reopen = %d, want 300", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	refused(t, path, "is empty (0 bytes)", "kairo store salvage")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	refused(t, path, "is missing", "kairo store salvage")
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refusal created %s: %v", path, err)
	}

	fresh := filepath.Join(t.TempDir(), "events.db")
	if err := os.WriteFile(fresh, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s = openSQLite(t, fresh)
	bustest.AppendN(t, s, 0, 1)
	if s.LastSeq() != 1 {
		t.Fatalf("a new store's first event has seq %d", s.LastSeq())
	}
	s.Close()
}

// A clean store replaced by an older copy of itself, or by another home's
// store, is refused; the control is the same copy opened where it is.
func TestStoreReplacedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	fillStore(t, path, 100)
	old := filepath.Join(dir, "old.db")
	copyFile(t, path, old)
	copyFile(t, statePath(path), statePath(old))
	s := openSQLite(t, path)
	bustest.AppendN(t, s, 100, 50)
	s.Close()

	openSQLite(t, old).Close() // the copy, with its own state, is sound
	copyFile(t, old, path)
	refused(t, path, "ends at sequence number 100", "events up to 150", "older copy")

	other := filepath.Join(t.TempDir(), "events.db")
	fillStore(t, other, 10)
	copyFile(t, other, path)
	refused(t, path, "copied in from another home")
}

// crashChild, run by the test binary itself, opens the store KAIRO_TEST_STORE
// names, appends what it is told, says how far it got, and waits to be killed.
func TestCrashChild(t *testing.T) {
	path := os.Getenv("KAIRO_TEST_STORE")
	if path == "" {
		t.Skip("run by TestStoreWALRemoved")
	}
	s, err := Open(path, Config{})
	if err != nil {
		fmt.Println("error", err)
		return
	}
	n, _ := strconv.Atoi(os.Getenv("KAIRO_TEST_EVENTS"))
	bustest.AppendN(t, s, int(s.LastSeq()), n)
	fmt.Println("acked", s.LastSeq())
	time.Sleep(time.Minute)
}

// crash runs a process that appends n events to the store at path and is
// killed with SIGKILL once they are acknowledged; it returns the last
// acknowledged sequence number.
func crash(t *testing.T, path string, n int) uint64 {
	t.Helper()
	cmd := osexec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "KAIRO_TEST_STORE="+path, "KAIRO_TEST_EVENTS="+strconv.Itoa(n))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	r := bufio.NewReader(out)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the child ended before it said how far it got: %v", err)
		}
		if f := strings.Fields(line); len(f) == 2 && f[0] == "acked" {
			acked, _ := strconv.ParseUint(f[1], 10, 64)
			cmd.Process.Signal(syscall.SIGKILL)
			go io.Copy(io.Discard, r)
			return acked
		} else if len(f) > 0 && f[0] == "error" {
			t.Fatalf("the child: %s", line)
		}
	}
}

// A daemon killed with SIGKILL leaves its newest events in the WAL, which
// the next open reads (the control: nothing acknowledged is lost). With
// the WAL removed, the open is refused and says which events may be gone;
// `kairo store check` reports the same, and a salvage gives a store whose
// new events never take a number that was handed out.
func TestStoreWALRemoved(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	fillStore(t, path, 200) // clean: in the file
	acked := crash(t, path, 500)
	if acked != 700 {
		t.Fatalf("the child acknowledged up to %d, want 700", acked)
	}
	image := filepath.Join(t.TempDir(), "events.db")
	for _, suffix := range []string{"", "-wal", ".state"} {
		copyFile(t, path+suffix, image+suffix)
	}
	s := openSQLite(t, image) // the control: the crash image with its WAL
	if got := s.LastSeq(); got != acked {
		t.Fatalf("after a kill, LastSeq = %d, want the acknowledged %d", got, acked)
	}
	s.Close()

	if err := os.Remove(path + "-wal"); err != nil {
		t.Fatal(err)
	}
	os.Remove(path + "-shm")
	// The file holds the 200 events of the clean close and what the
	// checkpointer copied in before the kill.
	rep, err := Check(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	inFile := uint64(rep.Events)
	if rep.Sound() || inFile < 200 || inFile > acked || rep.Last != inFile || !rep.WALMissing || !strings.Contains(rep.Summary(), "may have been acknowledged") {
		t.Fatalf("check of the store without its WAL:\n%s%+v", rep.Summary(), rep)
	}
	refused(t, path, "did not stop cleanly", "-wal", "is missing", fmt.Sprintf("after sequence number %d", inFile))
	dst := filepath.Join(dir, "salvaged.db")
	rep, err = Salvage(context.Background(), path, dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(rep.Events) != inFile {
		t.Fatalf("salvaged %d events, want the %d in the file", rep.Events, inFile)
	}
	s = openSQLite(t, dst)
	defer s.Close()
	bustest.AppendN(t, s, 10_000, 1)
	if s.LastSeq() <= acked {
		t.Fatalf("the salvaged store gave the new event seq %d, a number acknowledged before (up to %d)", s.LastSeq(), acked)
	}
	var seqs []uint64
	s.Scan(context.Background(), bus.Query{ToSeq: inFile}, func(ev *abi.Event) error { seqs = append(seqs, ev.Seq); return nil })
	if uint64(len(seqs)) != inFile || seqs[0] != 1 || seqs[len(seqs)-1] != inFile {
		t.Fatalf("the salvaged store holds %d of the %d events", len(seqs), inFile)
	}
}

// damage overwrites a page in the middle of the store file with garbage.
func damage(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	damagePage(t, path, fi.Size()/4096/2+1)
}

// damagePage overwrites page number pageno (from 1) of the store file with
// garbage.
func damagePage(t *testing.T, path string, pageno int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := int64(4096)
	if _, err := f.WriteAt([]byte(strings.Repeat("\xde\xad\xbe\xef", int(page/4))), (pageno-1)*page); err != nil {
		t.Fatal(err)
	}
}

// packPage is the number of a page in the middle of the store's packs:
// damage there loses events, where damage to the events table's rows (id,
// type, time) loses none.
func packPage(t *testing.T, path string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var pages []int64
	rows, err := db.Query(`SELECT pageno FROM dbstat WHERE name = 'packs' ORDER BY pageno`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var p int64
		rows.Scan(&p)
		pages = append(pages, p)
	}
	if len(pages) == 0 {
		t.Fatalf("%s has no pages of packs", path)
	}
	return pages[len(pages)/2]
}

// A damaged page in the middle of the file is found by the open's page
// check, before anything is served (it used to be found by the agent's
// rebuild seconds later, which stopped the daemon). The check reports it,
// and a salvage keeps every event it can read and names the rest.
func TestStoreDamagedPage(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	fillStore(t, path, 4000)
	rep, err := Check(context.Background(), path, nil)
	if err != nil || !rep.Sound() || rep.Events != 4000 {
		t.Fatalf("the check of a sound store (the control): %v\n%s", err, rep.Summary())
	}
	start := time.Now()
	openSQLite(t, path).Close()
	healthy := time.Since(start)

	damagePage(t, path, packPage(t, path))
	refused(t, path, "kairo store salvage")

	var stages []string
	rep, err = Check(context.Background(), path, func(stage string, done, total uint64) {
		if len(stages) == 0 || stages[len(stages)-1] != stage {
			stages = append(stages, stage)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sound() || len(rep.Problems) == 0 {
		t.Fatalf("the check of a damaged store:\n%s", rep.Summary())
	}
	if strings.Join(stages, ",") != "pages,events" {
		t.Fatalf("the check's progress went through %q", stages)
	}
	dst := filepath.Join(dir, "salvaged.db")
	rep, err = Salvage(context.Background(), path, dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	lost := uint64(0)
	for _, r := range rep.Lost {
		lost += r.To - r.From + 1
	}
	if rep.Events == 0 || rep.Events+int(lost) < 4000-64 || rep.Events >= 4000 {
		t.Fatalf("salvage read %d events and lost %d of 4000:\n%s", rep.Events, lost, rep.Summary())
	}
	s := openSQLite(t, dst)
	defer s.Close()
	n := 0
	s.Scan(context.Background(), bus.Query{}, func(*abi.Event) error { n++; return nil })
	if n != rep.Events {
		t.Fatalf("the salvaged store holds %d events, the report says %d", n, rep.Events)
	}
	t.Logf("healthy open %v; salvaged %d, lost %d: %v", healthy, rep.Events, lost, rep.Lost)
}

// BenchmarkOpenSQLite is what the checks of an open cost a healthy store:
// the open of a store of 20,000 and of 300,000 events, with the page
// check and without it (as before it existed), in one run.
func BenchmarkOpenSQLite(b *testing.B) {
	for _, n := range []int{20_000, 300_000} {
		path := filepath.Join(b.TempDir(), "events.db")
		s, err := Open(path, Config{})
		if err != nil {
			b.Fatal(err)
		}
		bustest.AppendN(b, s, 0, n)
		s.Close()
		fi, _ := os.Stat(path)
		for _, check := range []bool{false, true} {
			b.Run(fmt.Sprintf("events=%d/check=%v", n, check), func(b *testing.B) {
				defer func(d time.Duration) { quickCheckBudget = d }(quickCheckBudget)
				if !check {
					quickCheckBudget = 0
				}
				for range b.N {
					s, err := Open(path, Config{})
					if err != nil {
						b.Fatal(err)
					}
					s.Close()
				}
				b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/open")
				b.ReportMetric(float64(fi.Size())/(1<<20), "store-MiB")
			})
		}
	}
}

// A store too large to check before it serves opens at once, and its
// pages are checked while it serves: damage in the middle of the file is
// logged with the way out, and Close waits for the check. The control: a
// sound store of the same size logs nothing.
func TestStoreDamagedPageBehind(t *testing.T) {
	defer func(n int64, d time.Duration) { quickCheckWhole, checkBehindAfter = n, d }(quickCheckWhole, checkBehindAfter)
	quickCheckWhole, checkBehindAfter = 0, 0 // every store is "large", checked at once
	for _, damaged := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "events.db")
		fillStore(t, path, 4000)
		if damaged {
			damage(t, path)
		}
		var log testkit.SyncBuffer
		s, err := Open(path, Config{Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if err != nil {
			t.Fatalf("damaged=%v: the open waited for the page check: %v", damaged, err)
		}
		if s.backCheck == nil {
			t.Fatal("no page check after the open")
		}
		<-s.backCheck
		s.Close()
		found := strings.Contains(log.String(), "fails SQLite's page check")
		if found != damaged || damaged && !strings.Contains(log.String(), "kairo store salvage") {
			t.Errorf("damaged=%v, the log says:\n%s", damaged, log.String())
		}
	}
}
