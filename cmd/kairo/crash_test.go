package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/sdk/client"
	"github.com/vmihailenco/msgpack/v5"
)

// TestCrashRecovery kills the daemon with SIGKILL while clients publish, and
// checks after each restart that every acknowledged event is stored exactly
// once, at the sequence number it was acknowledged with.
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	const (
		rounds  = 4
		clients = 4
	)
	home := t.TempDir()
	acked := map[string]uint64{}                      // every acknowledged ID → its seq, all rounds
	scope := fmt.Sprintf("operator/%d:", os.Getuid()) // the ids the clients choose are stored in it

	d := startUp(t, home)
	for round := 0; round < rounds; round++ {
		prev := len(acked)
		var (
			mu   sync.Mutex
			wg   sync.WaitGroup
			stop = make(chan struct{})
		)
		for cl := 0; cl < clients; cl++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				c, err := client.Dial(ctx, d.socket())
				if err != nil {
					t.Errorf("client %d: %v", cl, err)
					return
				}
				defer c.Close()
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					id := fmt.Sprintf("c%d-r%d-%d", cl, round, n)
					data, _ := msgpack.Marshal(map[string]int{"client": cl, "round": round, "n": n})
					res, err := c.Publish(ctx, abi.Event{ID: id, Type: "test.crash", Data: data})
					if err != nil {
						return // the daemon died under us: this one was not acknowledged
					}
					if res.Duplicate || res.ID != scope+id || res.Seq == 0 {
						t.Errorf("publish %s: %+v, want a fresh event", id, res)
						return
					}
					mu.Lock()
					acked[res.ID] = res.Seq
					mu.Unlock()
				}
			}()
		}
		// Kill while they publish: once the first publish of the round is
		// acknowledged (a loaded machine may take a while to get there),
		// at a random moment after it.
		acknowledged := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(acked) - prev
		}
		for deadline := time.Now().Add(30 * time.Second); acknowledged() == 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(time.Duration(200+rand.IntN(200)) * time.Millisecond)
		before := acknowledged()
		d.kill()
		close(stop)
		wg.Wait()
		t.Logf("round %d: SIGKILL after %d acknowledged publishes (%d by the time the clients stopped)", round, before, len(acked)-prev)
		if before == 0 {
			t.Fatalf("round %d: no publish was acknowledged before the kill\n%s", round, d.stderr)
		}

		d = startUp(t, home)
		verifyStore(t, d, acked)
	}

	// An acknowledged ID published again is a duplicate at the same seq.
	c := d.dial()
	for _, id := range []string{"c0-r0-0", fmt.Sprintf("c%d-r%d-0", clients-1, rounds-1)} {
		want, ok := acked[scope+id]
		if !ok {
			continue
		}
		res, err := c.Publish(context.Background(), abi.Event{ID: id, Type: "test.crash"})
		if err != nil || !res.Duplicate || res.Seq != want {
			t.Errorf("re-publish %s: %+v, %v; want a duplicate of seq %d", id, res, err, want)
		}
	}
	c.Close()

	if code := d.stop(); code != 0 {
		t.Fatalf("kairo up exited %d after SIGTERM\n%s", code, d.stderr)
	}
	db, err := sql.Open("sqlite", filepath.Join(home, "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var check string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check: %q, %v", check, err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM events WHERE type = 'test.crash'`).Scan(&n); err != nil || n < len(acked) {
		t.Fatalf("%d test events in the file (%v), want at least the %d acknowledged", n, err, len(acked))
	}
}

// verifyStore replays everything over IPC and checks the acknowledged
// events against it.
func verifyStore(t *testing.T, d *upProc, acked map[string]uint64) {
	t.Helper()
	c := d.dial()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	count := map[string]int{}
	at := map[string]uint64{}
	var last uint64
	res, err := c.Replay(ctx, abi.ReplayParams{}, func(ev *abi.Event) error {
		if ev.Seq <= last {
			return fmt.Errorf("seq %d (%s) after seq %d: not strictly increasing", ev.Seq, ev.ID, last)
		}
		if ev.Seq != last+1 {
			return fmt.Errorf("seq %d (%s) after seq %d: a gap", ev.Seq, ev.ID, last)
		}
		last = ev.Seq
		count[ev.ID]++
		at[ev.ID] = ev.Seq
		return nil
	})
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	for id, n := range count {
		if n != 1 {
			t.Errorf("ID %s is stored %d times", id, n)
		}
	}
	missing := 0
	for id, seq := range acked {
		switch {
		case count[id] == 0:
			if missing++; missing <= 10 {
				t.Errorf("acknowledged event %s (seq %d) is missing after the crash", id, seq)
			}
		case at[id] != seq:
			t.Errorf("acknowledged event %s was at seq %d, is at %d", id, seq, at[id])
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged events are missing", missing, len(acked))
	}
	if res.Count != len(count) {
		t.Errorf("replay result counts %d events, %d were delivered", res.Count, len(count))
	}
}
