package abi_test

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/kairo-os/kairo/abi"
	"github.com/vmihailenco/msgpack/v5"
)

// nilArray is a MsgPack array of n nils: one byte an entry, sixteen for a
// reflection decoder.
func nilArray(n int) []byte {
	b := []byte{0xdd, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	return append(b, bytes.Repeat([]byte{0xc0}, n)...)
}

func TestSpawnParamsBounds(t *testing.T) {
	huge := strings.Repeat("x", abi.MaxIDLen+1)
	for _, tc := range []struct {
		name   string
		params map[string]any
		want   string
	}{
		{"argv entries", map[string]any{"argv": msgpack.RawMessage(nilArray(abi.MaxListLen + 1))}, "4097 entries, over its bound of 4096 (abi.MaxListLen)"},
		{"argv bytes", map[string]any{"argv": []string{strings.Repeat("a", abi.MaxListBytes), "b"}}, "(abi.MaxListBytes)"},
		{"env entries", map[string]any{"argv": []string{"sh"}, "env": msgpack.RawMessage(nilArray(abi.MaxListLen + 1))}, "(abi.MaxListLen)"},
		{"params entries", map[string]any{"params": msgpack.RawMessage(append([]byte{0xdf, 0, 0, 0x10, 1}, bytes.Repeat([]byte{0xc0}, 2*(abi.MaxListLen+1))...))}, "(abi.MaxListLen)"},
		{"correlation id", map[string]any{"argv": []string{"sh"}, "correlationId": huge}, "correlationId has 257 bytes, over its bound of 256 (abi.MaxIDLen)"},
		{"cwd", map[string]any{"argv": []string{"sh"}, "cwd": strings.Repeat("/", abi.MaxPathLen+1)}, "cwd has 4097 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := msgpack.Marshal(tc.params)
			if err != nil {
				t.Fatal(err)
			}
			var p abi.SpawnParams
			if err := msgpack.Unmarshal(raw, &p); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("decode: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// The control: a spawn at the bounds decodes whole.
	full := make([]string, abi.MaxListLen)
	for i := range full {
		full[i] = "arg"
	}
	raw, _ := msgpack.Marshal(map[string]any{"argv": full, "env": []string{"A=1"}, "params": map[string]string{"k": "v"}, "correlationId": huge[:abi.MaxIDLen]})
	var p abi.SpawnParams
	if err := msgpack.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Argv) != abi.MaxListLen || p.Env[0] != "A=1" || p.Params["k"] != "v" || len(p.CorrelationID) != abi.MaxIDLen {
		t.Fatalf("decoded %d argv, env %v, params %v", len(p.Argv), p.Env, p.Params)
	}
}

// Four million nils in argv are refused before they are allocated.
func TestSpawnArgvOfNilsIsCheap(t *testing.T) {
	raw, _ := msgpack.Marshal(map[string]any{"argv": msgpack.RawMessage(nilArray(4 << 20))})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var p abi.SpawnParams
	err := msgpack.Unmarshal(raw, &p)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("a 4M-entry argv decoded")
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("refusing it allocated %d bytes", got)
	}
}

func TestOtherParamsBounds(t *testing.T) {
	long := strings.Repeat("p", abi.MaxIDLen+1)
	for _, v := range []any{&abi.ProcessRef{}, &abi.StdinParams{}, &abi.WaitParams{}, &abi.SignalParams{}, &abi.ResizeParams{}} {
		raw, _ := msgpack.Marshal(map[string]any{"processId": long})
		if err := msgpack.Unmarshal(raw, v); err == nil || !strings.Contains(err.Error(), "processId has 257 bytes") {
			t.Errorf("%T with a 257-byte processId: %v", v, err)
		}
		raw, _ = msgpack.Marshal(map[string]any{"processId": "p1"})
		if err := msgpack.Unmarshal(raw, v); err != nil {
			t.Errorf("%T with processId p1: %v", v, err)
		}
	}
	raw, _ := msgpack.Marshal(abi.CancelParams{CorrelationID: "run1", Reason: strings.Repeat("r", abi.MaxTextLen+1)})
	var c abi.CancelParams
	if err := msgpack.Unmarshal(raw, &c); err == nil || !strings.Contains(err.Error(), "reason has 1025 bytes") {
		t.Errorf("cancel with a long reason: %v", err)
	}
}

func TestEventLimits(t *testing.T) {
	ok := abi.Event{ID: strings.Repeat("i", abi.MaxIDLen), Source: strings.Repeat("s", abi.MaxSourceLen), Type: "a.b"}
	if err := abi.CheckEventLimits(&ok); err != nil {
		t.Fatal(err)
	}
	big := ok
	big.Source = strings.Repeat("s", 1<<20)
	if err := abi.CheckEventLimits(&big); err == nil || !strings.Contains(err.Error(), "event.source has 1048576 bytes, over its bound of 256 (abi.MaxSourceLen)") {
		t.Fatalf("1 MiB source: %v", err)
	}
}
