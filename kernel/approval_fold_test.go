package kernel

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/testkit"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/bustest"
	"github.com/kairo-os/kairo/kernel/bus/checkpoint"
	"github.com/kairo-os/kairo/kernel/bus/sqlite"
)

// approvalHome is a data folder: its log, and its checkpoints' folder.
type approvalHome struct {
	t    *testing.T
	dir  string
	logs testkit.SyncBuffer
	took time.Duration // the last LoadApprovals
}

func newApprovalHome(t *testing.T) *approvalHome {
	dir := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return &approvalHome{t: t, dir: dir}
}

func (h *approvalHome) ckp() string { return filepath.Join(h.dir, "checkpoints", "approvals.ckp") }

// open starts a kernel on the log, with the checkpoint or without; stop
// closes it (saving the checkpoint) and its bus.
func (h *approvalHome) open(withCheckpoint bool) (k *Kernel, stop func()) {
	t := h.t
	t.Helper()
	st, err := sqlite.Open(filepath.Join(h.dir, "events.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b := bus.New(st, bus.Config{})
	cfg := Config{ApprovalTimeout: time.Hour, Logger: slog.New(slog.NewTextHandler(&h.logs, nil))}
	if withCheckpoint {
		cfg.Checkpoints = filepath.Dir(h.ckp())
	}
	k = New(b, cfg)
	start := time.Now()
	if err := k.LoadApprovals(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.took = time.Since(start)
	return k, func() { k.Close(); b.Close() }
}

func onDeny(t *testing.T, k *Kernel, action string) abi.Approval {
	t.Helper()
	var a abi.Approval
	if aerr := call(t, k, theAgent, abi.MethodApprovalRequest, abi.ApprovalRequest{
		ActionID: action, CorrelationID: "run1", Tool: "skill.fetch", Mode: abi.ApprovalOnDeny, Skill: "fetch",
		Grants: abi.Grants{Hosts: []string{"example.org"}}, Reason: "refused: example.org",
	}, &a); aerr != nil {
		t.Fatal(aerr)
	}
	return a
}

func decide(t *testing.T, k *Kernel, id string, yes bool) {
	t.Helper()
	if aerr := call(t, k, operator, abi.MethodApprovalDecide, abi.ApprovalDecision{ID: id, Approved: yes}, nil); aerr != nil {
		t.Fatal(aerr)
	}
}

// spend records a spawn that spent approval id, as the kernel's spawn does.
func spend(t *testing.T, k *Kernel, id, pid string) {
	t.Helper()
	raw, _ := msgpack.Marshal(abi.ProcessSpawned{ProcessID: pid, Approval: id})
	bustest.MustPublish(t, k.Bus, &abi.Event{Type: abi.SubjectProcessSpawned, Source: "kernel", Data: raw})
}

// sameApprovals compares two tables field by field, times as instants.
func sameApprovals(t *testing.T, what string, got, want []abi.Approval) {
	t.Helper()
	norm := func(l []abi.Approval) []abi.Approval {
		out := make([]abi.Approval, len(l))
		for i, a := range l {
			a.Expires, a.RequestedAt = a.Expires.UTC(), a.RequestedAt.UTC()
			out[i] = a
		}
		return out
	}
	g, w := norm(got), norm(want)
	if len(g) != len(w) {
		t.Fatalf("%s: %d approvals, want %d", what, len(g), len(w))
	}
	for i := range g {
		if !reflect.DeepEqual(g[i], w[i]) {
			t.Fatalf("%s: approval %d is\n%+v\nwant\n%+v", what, i, g[i], w[i])
		}
	}
}

// writeApprovals writes approvals of every kind to k's log: pending,
// approved, denied, approved with grants and spent, approved with grants
// and not spent.
func writeApprovals(t *testing.T, k *Kernel, tag string) {
	request(t, k, tag+"-pending")
	decide(t, k, request(t, k, tag+"-yes").ID, true)
	decide(t, k, request(t, k, tag+"-no").ID, false)
	spent := onDeny(t, k, tag+"-spent")
	decide(t, k, spent.ID, true)
	spend(t, k, spent.ID, "p-"+tag)
	decide(t, k, onDeny(t, k, tag+"-unspent").ID, true)
	decide(t, k, onDeny(t, k, tag+"-denied").ID, false)
}

// The table a start folds from the checkpoint and the log after it is the
// table a fold of the whole log gives, field by field, and the start read
// only the events after the checkpoint; a checkpoint damaged, of another
// log or claiming grants its events do not is refused, and the start folds
// the whole log to the same table.
func TestApprovalCheckpoint(t *testing.T) {
	h := newApprovalHome(t)
	k, stop := h.open(true)
	bustest.PublishN(t, k.Bus, "kairo.test.prefix", 5000) // history the checkpoint skips
	writeApprovals(t, k, "a")
	stop() // saves the checkpoint
	if fi, err := os.Stat(h.ckp()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the checkpoint: %v, %v; want a file of mode 0600; log:\n%s", fi, err, h.logs.String())
	}

	// More history, written by a kernel with no checkpoint: it is the
	// checkpoint's tail. One approval of the checkpoint is decided in it,
	// one spent.
	k, stop = h.open(false)
	decide(t, k, "ap-a-pending", false)
	spend(t, k, "ap-a-unspent-rerun", "p-late")
	writeApprovals(t, k, "b")
	tail := k.Bus.LastSeq()
	stop()

	full, stop := h.open(false)
	want := full.Approvals(true)
	wantRead := full.approvals.read
	stop()
	byID := map[string]abi.Approval{}
	for _, a := range want {
		byID[a.ID] = a
	}
	if byID["ap-a-pending"].State != abi.ApprovalDenied || byID["ap-a-unspent-rerun"].UsedBy != "p-late" || byID["ap-b-spent-rerun"].UsedBy != "p-b" ||
		byID["ap-b-pending"].State != abi.ApprovalPending || byID["ap-b-unspent-rerun"].UsedBy != "" || len(want) != 12 {
		t.Fatalf("the whole log's fold: %+v", want)
	}

	k, stop = h.open(true)
	sameApprovals(t, "from the checkpoint", k.Approvals(true), want)
	read := k.approvals.read
	stop()
	t.Logf("a start read %d events with the checkpoint, %d without", read, wantRead)
	if wantRead < 5000 || read >= 100 || read == 0 {
		t.Fatalf("a start read %d events with the checkpoint, %d without; want the tail alone (under 100 of %d)", read, wantRead, tail)
	}

	// The checkpoint is now at the log's end: the next start reads nothing.
	k, stop = h.open(true)
	if k.approvals.read != 0 {
		t.Fatalf("a start on a checkpoint at the log's end read %d events", k.approvals.read)
	}
	sameApprovals(t, "from a checkpoint at the end", k.Approvals(true), want)
	stop()

	good, err := os.ReadFile(h.ckp())
	if err != nil {
		t.Fatal(err)
	}
	refusedStart := func(what, why string) {
		t.Helper()
		before := len(h.logs.String())
		k, stop := h.open(true)
		defer stop()
		if logs := h.logs.String()[before:]; !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, why) {
			t.Fatalf("%s: the start logged %q; want a warning that says %q", what, logs, why)
		}
		if k.approvals.read < wantRead {
			t.Fatalf("%s: the start read %d events, want the whole log's %d", what, k.approvals.read, wantRead)
		}
		sameApprovals(t, what, k.Approvals(true), want)
	}

	bad := bytes.Clone(good)
	bad[len(bad)-3] ^= 0xff
	os.WriteFile(h.ckp(), bad, 0o600)
	refusedStart("a damaged checkpoint", "checksum")

	// Another log's checkpoint.
	other := newApprovalHome(t)
	ko, stopo := other.open(true)
	writeApprovals(t, ko, "x")
	bustest.PublishN(t, ko.Bus, "kairo.test.prefix", 200)
	stopo()
	foreign, _ := os.ReadFile(other.ckp())
	os.WriteFile(h.ckp(), foreign, 0o600)
	refusedStart("another log's checkpoint", "another log")

	// A checkpoint that says a denied approval with grants was approved:
	// it is checked against its events and refused.
	b := mustBus(t, h)
	var tab approvalTable
	p, err := checkpoint.Load(t.Context(), b, writeFile(t, h.ckp(), good), approvalFoldVersion, &tab)
	if err != nil {
		t.Fatal(err)
	}
	denied := tab.byID["ap-a-denied-rerun"]
	if denied == nil || denied.a.State != abi.ApprovalDenied || denied.a.Grants.Empty() {
		t.Fatalf("the checkpoint holds %+v; want a-denied, denied, with grants", denied)
	}
	denied.a.State, denied.a.Decided.Approved = abi.ApprovalApproved, true
	b.Close()

	// The control: the checkpoint as it was saved is used.
	k, stop = h.open(true)
	if k.approvals.read >= 100 {
		t.Fatalf("the control checkpoint was not used: %d events read", k.approvals.read)
	}
	stop()
	if err := checkpoint.Save(h.ckp(), approvalFoldVersion, "", p, &tab); err != nil {
		t.Fatal(err)
	}
	before := len(h.logs.String())
	k, stop = h.open(true)
	defer stop()
	if logs := h.logs.String()[before:]; !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, denied.a.ID) {
		t.Fatalf("a planted approval: the start logged %q; want a warning that names %s", logs, denied.a.ID)
	}
	sameApprovals(t, "a planted approval", k.Approvals(true), want)
}

func mustBus(t *testing.T, h *approvalHome) *bus.Bus {
	st, err := sqlite.Open(filepath.Join(h.dir, "events.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return bus.New(st, bus.Config{})
}

func writeFile(t *testing.T, path string, b []byte) string {
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Past maxDecidedApprovals decided approvals, the table keeps the newest
// decided and every pending one, however old, and reports each it drops;
// a start from the checkpoint and one from the whole log keep the same.
// What was dropped is in the log: deciding it again says so, and asking
// for it again is refused rather than asked twice.
func TestApprovalWindow(t *testing.T) {
	h := newApprovalHome(t)
	k, stop := h.open(true)
	old := request(t, k, "old")
	const over = 12
	var ids []string
	for i := range maxDecidedApprovals + over {
		a := request(t, k, "w"+strconv.Itoa(i))
		decide(t, k, a.ID, i%2 == 0)
		ids = append(ids, a.ID)
	}
	check := func(what string, k *Kernel) []abi.Approval {
		t.Helper()
		all := k.Approvals(true)
		if len(all) != maxDecidedApprovals+1 || all[0].ID != old.ID || all[0].State != abi.ApprovalPending {
			t.Fatalf("%s: %d approvals, first %+v; want the old pending one and %d decided", what, len(all), all[0], maxDecidedApprovals)
		}
		for i, a := range all[1:] {
			if a.ID != ids[over+i] {
				t.Fatalf("%s: approval %d is %s, want %s: the newest decided", what, i+1, a.ID, ids[over+i])
			}
		}
		return all
	}
	live := check("live", k)
	if n := strings.Count(h.logs.String(), "left the kernel's window"); n != over {
		t.Fatalf("%d drops reported, want %d:\n%s", n, over, h.logs.String())
	}
	wantNotFound(t, call(t, k, operator, abi.MethodApprovalDecide, abi.ApprovalDecision{ID: ids[0], Approved: true}, nil), "no approval")
	if aerr := call(t, k, theAgent, abi.MethodApprovalRequest, abi.ApprovalRequest{
		ActionID: "w0", Tool: "skill.fetch", Mode: abi.ApprovalAlways,
	}, nil); aerr == nil || !strings.Contains(aerr.Message, "left the kernel's window") {
		t.Fatalf("asking again for a dropped approval: %v; want a refusal that says it left the window", aerr)
	}
	if all := k.Approvals(true); len(all) != maxDecidedApprovals+1 {
		t.Fatalf("after the refused request: %d approvals", len(all))
	}
	stop()

	k, stop = h.open(true)
	sameApprovals(t, "from the checkpoint", check("from the checkpoint", k), live)
	stop()
	k, stop = h.open(false)
	sameApprovals(t, "from the whole log", check("from the whole log", k), live)
	stop()
	if !strings.Contains(h.logs.String(), "left=12") {
		t.Fatalf("the whole log's fold did not report what it left in the log:\n%s", h.logs.String())
	}
}

func wantNotFound(t *testing.T, aerr *abi.Error, words string) {
	t.Helper()
	if aerr == nil || aerr.Code != abi.CodeNotFound || !strings.Contains(aerr.Message, words) {
		t.Fatalf("got %v, want not found: %s", aerr, words)
	}
}

// On a log of KAIRO_FOLD_EVENTS events (unset: skipped; 1000000 is the
// issue's size), how many events and how long a start's fold of the
// approvals takes, with the checkpoint and without:
//
//	KAIRO_FOLD_EVENTS=1000000 go test ./kernel/ -run TestApprovalStartOnLargeLog -v
func TestApprovalStartOnLargeLog(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("KAIRO_FOLD_EVENTS"))
	if n <= 0 {
		t.Skip("set KAIRO_FOLD_EVENTS to the log's size")
	}
	h := newApprovalHome(t)
	k, stop := h.open(true)
	for i := 0; i < n; i += 100000 {
		bustest.PublishN(t, k.Bus, "kairo.test.prefix", min(100000, n-i))
		writeApprovals(t, k, "a"+strconv.Itoa(i))
	}
	stop()
	k, stop = h.open(false)
	writeApprovals(t, k, "tail")
	stop()
	for _, withCheckpoint := range []bool{false, true} {
		k, stop := h.open(withCheckpoint)
		t.Logf("checkpoint %v: LoadApprovals read %d events of %d in %v, %d approvals", withCheckpoint, k.approvals.read, k.Bus.LastSeq(), h.took.Round(time.Millisecond), len(k.Approvals(true)))
		stop()
	}
}
