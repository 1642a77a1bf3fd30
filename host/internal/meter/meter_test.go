package meter

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// features are those of the runtimes of the tests: the host's (2.0) and the
// proposals the rewriter decodes besides.
const features = api.CoreFeaturesV2 | experimental.CoreFeaturesTailCall |
	experimental.CoreFeaturesThreads | experimental.CoreFeaturesExtendedConst

func newRuntime(ctx context.Context, tb testing.TB) wazero.Runtime {
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCoreFeatures(features))
	tb.Cleanup(func() { rt.Close(ctx) })
	return rt
}

// meterHost is the test's side of the meter: a yield that counts its calls,
// hands out budget and traps once stop is set.
type meterHost struct {
	budget int32
	calls  atomic.Int64
	stop   atomic.Bool
}

var errStopped = errors.New("stopped")

func (h *meterHost) instantiate(ctx context.Context, tb testing.TB, rt wazero.Runtime) {
	_, err := rt.NewHostModuleBuilder(ImportModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
			h.calls.Add(1)
			if h.stop.Load() {
				panic(errStopped)
			}
			stack[0] = api.EncodeI32(h.budget)
		}), nil, []api.ValueType{api.ValueTypeI32}).
		Export(ImportYield).Instantiate(ctx)
	if err != nil {
		tb.Fatal(err)
	}
}

func instantiateEnv(ctx context.Context, tb testing.TB, rt wazero.Runtime) {
	_, err := rt.NewHostModuleBuilder("env").NewFunctionBuilder().
		WithFunc(func(x int32) int32 { return x + 1 }).Export("add1").Instantiate(ctx)
	if err != nil {
		tb.Fatal(err)
	}
}

// kitchen is a module with a bit of everything the rewriter must keep
// working: an import before the defined functions, calls, recursion, a
// table and call_indirect, ref.func in code, globals and elements, a start
// function, multi-value blocks, br_table, bulk memory, saturating
// conversions, SIMD, sign extension, typed select, and a name section.
func kitchen() asmModule {
	start := uint32(7)
	f32Big := math.Float32bits(1e10)
	return asmModule{
		types: [][2][]byte{
			{{i32}, {i32}},      // 0
			{nil, {i32}},        // 1
			{nil, nil},          // 2
			{{i32, i32}, {i32}}, // 3: a block with two params
		},
		imports: [][3]any{{"env", "add1", 0}},
		funcs: []asmFunc{
			{typ: 0, export: "sum", name: "sum", nLocal: 1, locals: []byte{2, i32}, body: cat(
				[]byte{0x02, 0x40, 0x03, 0x40}, local(0x20, 1), local(0x20, 0), []byte{0x4e, 0x0d, 0x01},
				local(0x20, 2), local(0x20, 1), []byte{0x6a}, local(0x21, 2),
				local(0x20, 1), i32c(1), []byte{0x6a}, local(0x21, 1),
				[]byte{0x0c, 0x00, 0x0b, 0x0b}, local(0x20, 2))},
			{typ: 0, export: "fib", name: "fib", body: cat(
				local(0x20, 0), i32c(2), []byte{0x48, 0x04, i32}, local(0x20, 0), []byte{0x05},
				local(0x20, 0), i32c(1), []byte{0x6b}, call(2),
				local(0x20, 0), i32c(2), []byte{0x6b}, call(2), []byte{0x6a, 0x0b})},
			{typ: 0, export: "viaTable", body: cat(i32c(10), local(0x20, 0), []byte{0x11, 0x00, 0x00})},
			{typ: 1, export: "refFunc", body: []byte{0xd2, 0x02, 0xd1, 0xfc, 0x10, 0x00, 0x6a}},
			{typ: 0, export: "multi", body: cat(local(0x20, 0), i32c(5), []byte{0x02, 0x03, 0x6a, 0x0b})},
			{typ: 0, export: "callImport", body: cat(local(0x20, 0), call(0))},
			{typ: 2, body: cat(i32c(42), []byte{0x24, 0x00})}, // the start function
			{typ: 1, export: "getG", body: []byte{0x23, 0x00}},
			{typ: 0, export: "brTable", body: cat(
				[]byte{0x02, 0x40, 0x02, 0x40, 0x02, 0x40}, local(0x20, 0), []byte{0x0e, 0x02, 0x00, 0x01, 0x02, 0x0b},
				i32c(10), []byte{0x0f, 0x0b}, i32c(20), []byte{0x0f, 0x0b}, i32c(30))},
			{typ: 1, export: "bulk", body: cat(
				i32c(200), i32c(7), i32c(4), []byte{0xfc, 0x0b, 0x00},
				i32c(300), i32c(100), i32c(5), []byte{0xfc, 0x0a, 0x00, 0x00},
				i32c(200), []byte{0x28, 0x02, 0x00}, i32c(300), []byte{0x2d, 0x00, 0x00}, []byte{0x6a})},
			{typ: 1, export: "satConv", body: []byte{0x43, byte(f32Big), byte(f32Big >> 8), byte(f32Big >> 16), byte(f32Big >> 24), 0xfc, 0x00}},
			{typ: 1, export: "simd", body: []byte{0xfd, 0x0c, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 0xfd, 0x1b, 0x02}},
			{typ: 1, export: "signExt", body: cat(i32c(255), []byte{0xc0})},
			{typ: 1, export: "selectT", body: cat(i32c(1), i32c(2), i32c(0), []byte{0x1c, 0x01, i32})},
			{typ: 0, export: "loopN", nLocal: 1, locals: []byte{1, i32}, body: cat(
				[]byte{0x02, 0x40, 0x03, 0x40}, local(0x20, 1), local(0x20, 0), []byte{0x4e, 0x0d, 0x01},
				local(0x20, 1), i32c(1), []byte{0x6a}, local(0x21, 1), []byte{0x0c, 0x00, 0x0b, 0x0b}, local(0x20, 1))},
			{typ: 0, export: "leaf", body: cat(local(0x20, 0), i32c(1), []byte{0x6a})},
			{typ: 0, export: "caller", body: cat(local(0x20, 0), call(16))},
			{typ: 1, export: "g1call", body: cat(i32c(1), []byte{0x23, 0x01, 0x26, 0x00}, i32c(7), i32c(1), []byte{0x11, 0x00, 0x00})},
		},
		tables: []byte{1, funcref, 0x00, 2},
		memory: true,
		globals: [][]byte{
			{i32, 0x01, 0x41, 0x00, 0x0b},
			{funcref, 0x00, 0xd2, 0x02, 0x0b},
		},
		start: &start,
		elems: [][]byte{
			{0x00, 0x41, 0x00, 0x0b, 0x02, 0x01, 0x02}, // active at 0: sum, fib
			{0x03, 0x00, 0x01, 0x02},                   // declarative: fib
			{0x05, funcref, 0x01, 0xd2, 0x01, 0x0b},    // passive, expressions: sum
		},
		data:    [][]byte{append([]byte{0x00, 0x41, 0xe4, 0x00, 0x0b, 0x05}, "hello"...)},
		customs: [][2]string{{"kairo.manifest", "name = 'x'"}},
	}
}

// kitchenCalls are the exports of kitchen, their argument and the result.
var kitchenCalls = []struct {
	name string
	arg  []uint64
	want int32
}{
	{"sum", []uint64{10}, 45},
	{"fib", []uint64{10}, 55},
	{"viaTable", []uint64{0}, 45},
	{"viaTable", []uint64{1}, 55},
	{"refFunc", nil, 2},
	{"multi", []uint64{3}, 8},
	{"callImport", []uint64{3}, 4},
	{"getG", nil, 42},
	{"brTable", []uint64{0}, 10},
	{"brTable", []uint64{1}, 20},
	{"brTable", []uint64{9}, 30},
	{"bulk", nil, 0x07070707 + 'h'},
	{"satConv", nil, math.MaxInt32},
	{"simd", nil, 3},
	{"signExt", nil, -1},
	{"selectT", nil, 2},
	{"loopN", []uint64{100}, 100},
	{"leaf", []uint64{1}, 2},
	{"caller", []uint64{1}, 2},
	{"g1call", nil, 13},
}

// instantiate compiles and instantiates wasm in a runtime of its own, with
// env and, when metered, the meter's import.
func instantiate(ctx context.Context, tb testing.TB, wasm []byte, h *meterHost) api.Module {
	tb.Helper()
	rt := newRuntime(ctx, tb)
	instantiateEnv(ctx, tb, rt)
	if h != nil {
		h.instantiate(ctx, tb, rt)
	}
	mod, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		tb.Fatal(err)
	}
	return mod
}

// The rewritten module computes what the original does.
func TestRewriteKeepsBehaviour(t *testing.T) {
	ctx := context.Background()
	orig := kitchen().bytes()
	rewritten, err := Rewrite(orig)
	if err != nil {
		t.Fatal(err)
	}
	before := instantiate(ctx, t, orig, nil)
	after := instantiate(ctx, t, rewritten, &meterHost{budget: 3})
	for _, c := range kitchenCalls {
		want, err := before.ExportedFunction(c.name).Call(ctx, c.arg...)
		if err != nil || int32(want[0]) != c.want {
			t.Fatalf("original %s%v = %v, %v; want %d", c.name, c.arg, want, err, c.want)
		}
		got, err := after.ExportedFunction(c.name).Call(ctx, c.arg...)
		if err != nil || int32(got[0]) != c.want {
			t.Fatalf("rewritten %s%v = %v, %v; want %d", c.name, c.arg, got, err, c.want)
		}
	}
	// Names follow their functions.
	if got := after.ExportedFunction("fib").Definition().DebugName(); !strings.Contains(got, "fib") {
		t.Errorf("fib is named %q after the rewrite", got)
	}
	if _, ok := after.ExportedGlobal(ExportFuel).(api.MutableGlobal); !ok {
		t.Errorf("no mutable global %s", ExportFuel)
	}
	// Custom sections are kept.
	if !strings.Contains(string(rewritten), "name = 'x'") {
		t.Error("the kairo.manifest custom section is gone")
	}
}

// Checks go where the package doc says, and only there: with a budget of
// zero, every check calls yield.
func TestCheckPlacement(t *testing.T) {
	ctx := context.Background()
	rewritten, err := Rewrite(kitchen().bytes())
	if err != nil {
		t.Fatal(err)
	}
	h := &meterHost{budget: 0}
	mod := instantiate(ctx, t, rewritten, h)
	for _, c := range []struct {
		name   string
		arg    uint64
		checks int64
		why    string
	}{
		{"leaf", 1, 0, "no loop, no call"},
		{"caller", 1, 1, "calls: one check on entry"},
		{"loopN", 100, 101, "a loop reached before any call: a check per pass of its head, none on entry"},
		{"fib", 10, 177, "recursion: one check per call"},
	} {
		h.calls.Store(0)
		if _, err := mod.ExportedFunction(c.name).Call(ctx, c.arg); err != nil {
			t.Fatal(err)
		}
		if got := h.calls.Load(); got != c.checks {
			t.Errorf("%s(%d) ran %d checks; want %d (%s)", c.name, c.arg, got, c.checks, c.why)
		}
	}
	// With a budget, yield is called once per budget+1 checks.
	h.budget = 99
	h.calls.Store(0)
	if _, err := mod.ExportedFunction("loopN").Call(ctx, 100_000); err != nil {
		t.Fatal(err)
	}
	if got := h.calls.Load(); got < 990 || got > 1010 {
		t.Errorf("100001 checks with a budget of 99 called yield %d times; want about 1000", got)
	}
}

// spinners are guests that never end by themselves, and a control for each
// that ends.
func spinners() map[string]struct {
	mod  asmModule
	arg  uint64 // for the runaway; the control gets 3
	want int32  // the control's result
} {
	type spinner = struct {
		mod  asmModule
		arg  uint64
		want int32
	}
	loops := asmModule{ // (i32 n): n passes of an outer loop, each with 1000 passes of an inner one; n = 0 loops forever
		types: [][2][]byte{{{i32}, {i32}}},
		funcs: []asmFunc{{typ: 0, export: "run", nLocal: 1, locals: []byte{2, i32}, body: cat(
			[]byte{0x03, 0x40}, // outer loop
			i32c(0), local(0x21, 2),
			[]byte{0x03, 0x40}, // inner loop
			local(0x20, 2), i32c(1), []byte{0x6a}, local(0x22, 2), i32c(1000), []byte{0x48, 0x0d, 0x00, 0x0b},
			local(0x20, 1), i32c(1), []byte{0x6a}, local(0x22, 1), local(0x20, 0), []byte{0x47, 0x0d, 0x00, 0x0b}, // br_if n != count
			local(0x20, 1))}},
	}
	recursion := asmModule{ // (i32 n): 2^n calls, no loop
		types: [][2][]byte{{{i32}, {i32}}},
		funcs: []asmFunc{{typ: 0, export: "run", body: cat(
			local(0x20, 0), []byte{0x45, 0x04, i32}, i32c(1), []byte{0x05},
			local(0x20, 0), i32c(1), []byte{0x6b}, call(0),
			local(0x20, 0), i32c(1), []byte{0x6b}, call(0), []byte{0x6a, 0x0b})}},
	}
	tight := asmModule{ // (i32 n): counts down n to 0 in the tightest loop; n = -1 takes 2^32 passes
		types: [][2][]byte{{{i32}, {i32}}},
		funcs: []asmFunc{{typ: 0, export: "run", body: cat(
			[]byte{0x03, 0x40}, local(0x20, 0), i32c(1), []byte{0x6b}, local(0x22, 0), []byte{0x0d, 0x00, 0x0b}, i32c(7))}},
	}
	return map[string]spinner{
		"tight loop":         {tight, math.MaxUint32, 7},
		"loop in a loop":     {loops, 0, 3},
		"recursion, no loop": {recursion, 62, 8},
	}
}

// The host stops a runaway guest by zeroing the fuel and making yield trap;
// the same guest, asked for a finite amount of work, completes under the
// same meter.
func TestStop(t *testing.T) {
	ctx := context.Background()
	for name, s := range spinners() {
		t.Run(name, func(t *testing.T) {
			rewritten, err := Rewrite(s.mod.bytes())
			if err != nil {
				t.Fatal(err)
			}
			h := &meterHost{budget: 1 << 12}
			mod := instantiate(ctx, t, rewritten, h)
			run := mod.ExportedFunction("run")
			if res, err := run.Call(ctx, 3); err != nil || int32(res[0]) != s.want {
				t.Fatalf("control: %v, %v; want %d", res, err, s.want)
			}
			fuel := mod.ExportedGlobal(ExportFuel).(api.MutableGlobal)
			time.AfterFunc(50*time.Millisecond, func() {
				h.stop.Store(true)
				fuel.Set(0)
			})
			start := time.Now()
			_, err = run.Call(ctx, s.arg)
			if !errors.Is(err, errStopped) {
				t.Fatalf("err = %v; want the yield's panic", err)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("stopping took %v", took)
			}
		})
	}
}

// Tail calls and atomics (proposals the host does not enable, but which the
// rewriter decodes) survive the rewrite.
func TestRewriteProposals(t *testing.T) {
	ctx := context.Background()
	m := asmModule{
		types: [][2][]byte{{{i32}, {i32}}, {nil, {i32}}},
		funcs: []asmFunc{
			{typ: 0, export: "countdown", body: cat( // return_call itself down to 0
				local(0x20, 0), []byte{0x45, 0x04, 0x40}, i32c(0), []byte{0x0f, 0x0b},
				local(0x20, 0), i32c(1), []byte{0x6b}, []byte{0x12, 0x00})},
			{typ: 1, export: "atomic", body: cat(i32c(0), i32c(5), []byte{0xfe, 0x1e, 0x02, 0x00}, // i32.atomic.rmw.add
				[]byte{0xfe, 0x03, 0x00},                                // atomic.fence
				i32c(0), []byte{0xfe, 0x10, 0x02, 0x00}, []byte{0x6a})}, // + i32.atomic.load
		},
	}
	wasm := m.bytes()
	// Give it a shared memory, which atomics ask for: flags 3, min 1, max 1.
	wasm = insertSection(wasm, secMemory, []byte{1, 0x03, 1, 1})
	rewritten, err := Rewrite(wasm)
	if err != nil {
		t.Fatal(err)
	}
	mod := instantiate(ctx, t, rewritten, &meterHost{budget: 10})
	if res, err := mod.ExportedFunction("countdown").Call(ctx, 1_000_000); err != nil || res[0] != 0 {
		t.Fatalf("countdown = %v, %v", res, err)
	}
	if res, err := mod.ExportedFunction("atomic").Call(ctx); err != nil || res[0] != 5 {
		t.Fatalf("atomic = %v, %v; want 0 + 5", res, err)
	}
}

// insertSection puts a section before the first section of a later kind.
func insertSection(wasm []byte, id byte, content []byte) []byte {
	r := reader{b: wasm, off: len(header)}
	for r.off < len(wasm) {
		at := r.off
		sid := r.byte()
		size := r.u32()
		if sid != secCustom && sectionRank[sid] > sectionRank[id] {
			out := append([]byte{}, wasm[:at]...)
			out = sect(out, id, content)
			return append(out, wasm[at:]...)
		}
		r.off += int(size)
	}
	return sect(append([]byte{}, wasm...), id, content)
}

// What the rewriter cannot vouch for, it refuses, and says why.
func TestRewriteRefuses(t *testing.T) {
	body := func(b ...byte) []byte {
		return asmModule{types: [][2][]byte{{nil, nil}}, funcs: []asmFunc{{typ: 0, body: b}}}.bytes()
	}
	cases := []struct {
		name        string
		wasm        []byte
		unsupported bool
		says        string
	}{
		{"not wasm", []byte("\x7fELF"), false, "not a WebAssembly 1.0 binary"},
		{"truncated", kitchen().bytes()[:200], false, ""},
		{"reserved import", asmModule{types: [][2][]byte{{nil, {i32}}}, imports: [][3]any{{ImportModule, ImportYield, 0}}}.bytes(), false, "reserves"},
		{"reserved export", asmModule{types: [][2][]byte{{nil, nil}}, funcs: []asmFunc{{typ: 0, export: ExportFuel}}}.bytes(), false, "reserves"},
		{"global past the module's", body(0x23, 0x00, 0x1a), false, "global 0 does not exist"},
		{"exceptions", body(0x06, 0x40, 0x0b), true, ""},
		{"GC", body(0xfb, 0x00), true, ""},
		{"relaxed SIMD", body(0xfd, 0x80, 0x02), true, ""},
		{"unknown 0xfc", body(0xfc, 0x20), true, ""},
		{"typed reference local", asmModule{types: [][2][]byte{{nil, nil}}, funcs: []asmFunc{{typ: 0, nLocal: 1, locals: []byte{1, 0x64, 0x00}}}}.bytes(), true, ""},
		{"bytes after the end", body(0x0b, 0x01), false, "after the function's end"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Rewrite(c.wasm)
			if err == nil {
				t.Fatal("rewritten; want an error")
			}
			if errors.Is(err, ErrUnsupported) != c.unsupported || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("err = %v; want unsupported=%v, saying %q", err, c.unsupported, c.says)
			}
		})
	}
}

// A module without imports, globals or exports gets them.
func TestRewriteEmptyModule(t *testing.T) {
	ctx := context.Background()
	rewritten, err := Rewrite(header)
	if err != nil {
		t.Fatal(err)
	}
	mod := instantiate(ctx, t, rewritten, &meterHost{})
	if mod.ExportedGlobal(ExportFuel) == nil {
		t.Fatal("no fuel global")
	}
}

// The rewriter never panics, and whatever wazero accepts before the
// rewrite it accepts after, or the rewriter refuses it.
func FuzzRewrite(f *testing.F) {
	f.Add(header)
	f.Add(kitchen().bytes())
	for _, s := range spinners() {
		f.Add(s.mod.bytes())
	}
	ctx := context.Background()
	// The interpreter validates as the compiler does, faster.
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(features))
	defer rt.Close(ctx)
	f.Fuzz(func(t *testing.T, wasm []byte) {
		rewritten, err := Rewrite(wasm)
		if err != nil {
			return
		}
		if !compiles(ctx, rt, wasm) {
			return
		}
		compiled, err := rt.CompileModule(ctx, rewritten)
		if err != nil {
			t.Fatalf("wazero takes the module but not its rewrite: %v", err)
		}
		compiled.Close(ctx)
	})
}

// compiles reports whether wazero takes wasm. Its validator panics on some
// invalid modules (v1.12: a function whose type index is out of range);
// that is a refusal too.
func compiles(ctx context.Context, rt wazero.Runtime, wasm []byte) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	compiled, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		return false
	}
	compiled.Close(ctx)
	return true
}

// dataModule has data segments to merge and segments that must not be:
// one whose gap an earlier segment wrote, overlapping ones, far ones.
func dataModule() []byte {
	seg := func(at int32, s string) []byte {
		b := append([]byte{0x00}, i32c(at)...)
		b = append(b, 0x0b)
		return append(uleb(b, uint64(len(s))), s...)
	}
	return asmModule{
		types:  [][2][]byte{{nil, nil}},
		funcs:  []asmFunc{{typ: 0, export: "nop"}},
		memory: true,
		data: [][]byte{
			seg(205, "ZZ"), // written first, in the gap between DD and EE
			seg(100, "AAAA"),
			seg(110, "BBBB"),
			seg(50, strings.Repeat("C", 72)), // over AAAA and BBBB, after them
			seg(200, "DD"),
			seg(210, "EE"),
			seg(400, "F"),
			seg(500, "G"),
			seg(502, "H"),
			seg(504, "I"),
		},
	}.bytes()
}

// countData returns the number of data segments of wasm.
func countData(t *testing.T, wasm []byte) int {
	r := reader{b: wasm, off: len(header)}
	for r.off < len(wasm) {
		id := r.byte()
		content := r.bytes(r.u32())
		if id == secData {
			c := reader{b: content}
			return int(c.u32())
		}
	}
	t.Fatal("no data section")
	return 0
}

// Merged data segments leave the memory as the original's leave it.
func TestDataMerge(t *testing.T) {
	ctx := context.Background()
	orig := dataModule()
	compacted, err := Compact(orig)
	if err != nil {
		t.Fatal(err)
	}
	rewritten, err := Rewrite(orig)
	if err != nil {
		t.Fatal(err)
	}
	if got := countData(t, compacted); got != 8 {
		t.Errorf("%d segments after Compact; want 8 (AAAA with BBBB, G with H and I)", got)
	}
	want, _ := instantiate(ctx, t, orig, nil).Memory().Read(0, 1024)
	for name, wasm := range map[string][]byte{"compacted": compacted, "rewritten": rewritten} {
		got, _ := instantiate(ctx, t, wasm, &meterHost{}).Memory().Read(0, 1024)
		if string(got) != string(want) {
			t.Errorf("%s: memory differs:\n got  %q\n want %q", name, got[:600], want[:600])
		}
	}
	// A data count section means the code may name segments by index:
	// they stay as they are.
	withCount := insertSection(orig, secDataCount, uleb(nil, 10))
	compacted, err = Compact(withCount)
	if err != nil {
		t.Fatal(err)
	}
	if got := countData(t, compacted); got != 10 {
		t.Errorf("%d segments with a data count section; want the 10 there were", got)
	}
}

// Compact never panics, and what wazero takes before it takes after.
func FuzzCompact(f *testing.F) {
	f.Add(dataModule())
	f.Add(kitchen().bytes())
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(features))
	defer rt.Close(ctx)
	f.Fuzz(func(t *testing.T, wasm []byte) {
		compacted, err := Compact(wasm)
		if err != nil || !compiles(ctx, rt, wasm) {
			return
		}
		compiled, err := rt.CompileModule(ctx, compacted)
		if err != nil {
			t.Fatalf("wazero takes the module but not its compaction: %v", err)
		}
		compiled.Close(ctx)
	})
}
