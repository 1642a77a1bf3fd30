package sandbox

import (
	"reflect"
	"testing"
	"time"
)

// TestPlanRoundTrip: what the kernel encodes is what the helper decodes,
// and a cut or padded plan is refused, never half applied.
func TestPlanRoundTrip(t *testing.T) {
	p := Default("/tmp", "/tmp", []string{"A=b"})
	p.ConnectTCP, p.BindTCP = []uint16{443, 8080}, []uint16{9000}
	p.UID, p.GID, p.IPC = 2000000400, 2000000401, true
	p.Limits = Limits{CPUSeconds: 5, Memory: 1 << 30, Processes: 64, FileSize: 1 << 20, OpenFiles: 99, Wall: time.Second, OutputBytes: 7, OutputRate: 8}
	pl, err := makePlan(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.rules) == 0 || len(pl.filter) == 0 {
		t.Fatalf("the plan has %d rules and %d filter instructions; want some of each", len(pl.rules), len(pl.filter))
	}
	enc := pl.encode()
	got, err := decodePlan(enc)
	if err != nil {
		t.Fatal(err)
	}
	want := *pl
	want.limits.Wall = 0 // the kernel's to enforce, not sent
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("decoded plan differs:\n got %+v\nwant %+v", *got, want)
	}
	for cut := range len(enc) {
		if _, err := decodePlan(enc[:cut]); err == nil {
			t.Fatalf("a plan cut to %d of %d bytes decoded", cut, len(enc))
		}
	}
	if _, err := decodePlan(append(enc, 0)); err == nil {
		t.Fatal("a plan with a byte too many decoded")
	}
	p.SkipSeccomp = true
	pl, _ = makePlan(p)
	if got, err := decodePlan(pl.encode()); err != nil || got.filter != nil {
		t.Fatalf("a plan without a filter decoded as %v, %v", got.filter, err)
	}
}
