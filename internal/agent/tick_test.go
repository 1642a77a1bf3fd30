package agent

import (
	"context"
	"sync"
	"testing"
	"time"
)

// collect runs k until n ticks ran, with work(t) inside each, and returns
// them.
func collect(t *testing.T, k *Ticker, n int, work func(Tick)) []Tick {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var ticks []Tick
	k.Run(ctx, func(tk Tick) {
		ticks = append(ticks, tk)
		if work != nil {
			work(tk)
		}
		if len(ticks) == n {
			cancel()
		}
	})
	if len(ticks) < n {
		t.Fatalf("%d ticks ran, want %d", len(ticks), n)
	}
	return ticks
}

// spins are the ticker's ways to wait: Go's timers alone, and the
// kernel's timer with a short spin (Ticker.Spin).
var spins = []struct {
	name string
	spin time.Duration
}{{"sleep", 0}, {"fine", 2 * time.Millisecond}}

// newTickerSpin is NewTicker with Spin set.
func newTickerSpin(t *testing.T, hz float64, overrun Overrun, spin time.Duration) *Ticker {
	t.Helper()
	k, err := NewTicker(hz, overrun)
	if err != nil {
		t.Fatal(err)
	}
	k.Spin = spin
	return k
}

func TestTickerKeepsTheRate(t *testing.T) {
	for _, c := range spins {
		t.Run(c.name, func(t *testing.T) { testTickerKeepsTheRate(t, c.spin) })
	}
}

func testTickerKeepsTheRate(t *testing.T, spin time.Duration) {
	// Catch-up, so that a loaded machine's late wake-ups skip nothing.
	k := newTickerSpin(t, 200, OverrunCatchUp, spin)
	ticks := collect(t, k, 40, nil)
	for i, tk := range ticks {
		if tk.N != uint64(i) || tk.Skipped != 0 {
			t.Fatalf("tick %d = %+v", i, tk)
		}
		if tk.Woke.Before(tk.At) {
			t.Fatalf("tick %d ran %v before it was due", i, tk.At.Sub(tk.Woke))
		}
		if want := ticks[0].At.Add(time.Duration(i) * 5 * time.Millisecond); !tk.At.Equal(want) {
			t.Fatalf("tick %d due at +%v, want +%v: the schedule drifts", i, tk.At.Sub(ticks[0].At), want.Sub(ticks[0].At))
		}
	}
}

// A tick that overruns: skip drops the late ticks, catch-up runs them all.
func TestTickerOverrun(t *testing.T) {
	// The third tick run overruns (not tick number 2: a loaded machine's
	// late wake-up may skip that one already).
	slow := func() func(Tick) {
		runs := 0
		return func(Tick) {
			if runs++; runs == 3 {
				time.Sleep(35 * time.Millisecond) // 3.5 periods
			}
		}
	}
	k, _ := NewTicker(100, OverrunSkip)
	ticks := collect(t, k, 6, slow())
	if ticks[3].Skipped < 2 || ticks[3].N != ticks[2].N+1+ticks[3].Skipped {
		t.Fatalf("after the overrun: %+v; want ticks skipped and the number caught up", ticks[3])
	}
	// Later ticks follow on; a late wake-up on a loaded machine may skip
	// more, and then says so.
	for i := 4; i < len(ticks); i++ {
		if ticks[i].N != ticks[i-1].N+1+ticks[i].Skipped {
			t.Fatalf("tick %d follows %d with %d skipped", ticks[i].N, ticks[i-1].N, ticks[i].Skipped)
		}
	}

	k, _ = NewTicker(100, OverrunCatchUp)
	ticks = collect(t, k, 8, slow())
	for i, tk := range ticks {
		if tk.N != uint64(i) || tk.Skipped != 0 {
			t.Fatalf("catch-up tick %d = %+v", i, tk)
		}
	}
	if late := ticks[3].Woke.Sub(ticks[3].At); late < 15*time.Millisecond {
		t.Fatalf("tick 3 ran %v late; catch-up should run it late, back to back", late)
	}
}

// The rate changes at run time, and the numbers go on.
func TestTickerSetHz(t *testing.T) {
	for _, c := range spins {
		t.Run(c.name, func(t *testing.T) { testTickerSetHz(t, c.spin) })
	}
}

func testTickerSetHz(t *testing.T, spin time.Duration) {
	k := newTickerSpin(t, 1000, OverrunSkip, spin)
	var once sync.Once
	ticks := collect(t, k, 15, func(tk Tick) {
		if tk.N >= 9 { // tick 9 itself may be skipped on a loaded machine
			once.Do(func() {
				if err := k.SetHz(50); err != nil {
					t.Error(err)
				}
			})
		}
	})
	for i := 1; i < len(ticks); i++ {
		if ticks[i].N != ticks[i-1].N+1 && ticks[i].Skipped == 0 {
			t.Fatalf("tick %d follows %d", ticks[i].N, ticks[i-1].N)
		}
	}
	a, b := ticks[len(ticks)-2], ticks[len(ticks)-1]
	if gap := b.At.Sub(a.At); a.Hz != 50 || b.Hz != 50 || gap != time.Duration(b.N-a.N)*20*time.Millisecond {
		t.Fatalf("after SetHz(50) ticks %d and %d are %v apart at %v Hz; want 20ms a tick", a.N, b.N, gap, b.Hz)
	}
	if err := k.SetHz(0); err == nil {
		t.Fatal("SetHz(0) succeeded")
	}
	if _, err := NewTicker(100, "sometimes"); err == nil {
		t.Fatal("an unknown overrun policy was accepted")
	}
}

// A Wake brings the next tick forward, and the numbers go on counting the
// schedule.
func TestTickerWake(t *testing.T) {
	for _, c := range spins {
		t.Run(c.name, func(t *testing.T) { testTickerWake(t, c.spin) })
	}
}

func testTickerWake(t *testing.T, spin time.Duration) {
	k := newTickerSpin(t, 2, OverrunSkip, spin) // 500 ms a tick: a wake-up is plainly early
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var ticks []Tick
	var woke time.Time
	k.Run(ctx, func(tk Tick) {
		ticks = append(ticks, tk)
		switch len(ticks) {
		case 1:
			go func() {
				time.Sleep(50 * time.Millisecond)
				woke = time.Now()
				k.Wake()
			}()
		case 3:
			cancel()
		}
	})
	if len(ticks) < 3 {
		t.Fatalf("%d ticks ran, want 3", len(ticks))
	}
	origin := ticks[0].At
	// Tick 1 was due at +500ms: it ran at the wake-up instead.
	if tk := ticks[1]; tk.N != 1 || !tk.Early || tk.At.Before(woke) || tk.At.Sub(origin) >= 400*time.Millisecond {
		t.Fatalf("after a wake-up at +%v: tick %d at +%v (early %v); want tick 1 at once", woke.Sub(origin), tk.N, tk.At.Sub(origin), tk.Early)
	}
	// Tick 2 keeps its time in the schedule.
	if tk := ticks[2]; tk.N != 2 || tk.Early || !tk.At.Equal(origin.Add(time.Second)) {
		t.Fatalf("tick %d at +%v (early %v); want tick 2 at +1s", tk.N, tk.At.Sub(origin), tk.Early)
	}
}

// Wake-ups faster than the rate get at most one tick a period: tick n
// never runs before tick n-1 was due.
func TestTickerWakeKeepsTheRate(t *testing.T) {
	for _, c := range spins {
		t.Run(c.name, func(t *testing.T) { testTickerWakeKeepsTheRate(t, c.spin) })
	}
}

func testTickerWakeKeepsTheRate(t *testing.T, spin time.Duration) {
	k := newTickerSpin(t, 50, OverrunCatchUp, spin)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				k.Wake()
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	defer close(stop)
	var ticks []Tick
	k.Run(ctx, func(tk Tick) {
		ticks = append(ticks, tk)
		if len(ticks) == 20 {
			cancel()
		}
	})
	if len(ticks) < 20 {
		t.Fatalf("%d ticks ran, want 20", len(ticks))
	}
	origin := ticks[0].At
	for i, tk := range ticks {
		if tk.N != uint64(i) {
			t.Fatalf("tick %d numbered %d", i, tk.N)
		}
		if i > 0 && tk.Woke.Before(origin.Add(time.Duration(i-1)*20*time.Millisecond)) {
			t.Fatalf("tick %d ran at +%v, before tick %d was due at +%v", i, tk.Woke.Sub(origin), i-1, time.Duration(i-1)*20*time.Millisecond)
		}
	}
}
