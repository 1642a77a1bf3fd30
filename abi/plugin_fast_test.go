package abi

import (
	"bytes"
	"testing"
)

// sameBatch compares batches by their encoding (a NaN in an agent value
// equals itself there), and by what the encoding does not show: nil against
// empty slices and the locations of times.
func sameBatch(a, b *Batch) bool {
	if !bytes.Equal(AppendBatch(nil, a), AppendBatch(nil, b)) {
		return false
	}
	if (a.Events == nil) != (b.Events == nil) || (a.ToolCalls == nil) != (b.ToolCalls == nil) ||
		(a.CallResults == nil) != (b.CallResults == nil) || (a.ServiceCalls == nil) != (b.ServiceCalls == nil) {
		return false
	}
	if a.Time.Location() != b.Time.Location() {
		return false
	}
	for i := range a.Events {
		x, y := &a.Events[i], &b.Events[i]
		if x.Time.Location() != y.Time.Location() || (x.Data == nil) != (y.Data == nil) {
			return false
		}
	}
	return true
}

// The fast path decodes every batch it takes as the general decoder does,
// into a fresh Batch or into the events of an earlier one.
func FuzzBatchFastPath(f *testing.F) {
	for _, b := range pluginBatches(f) {
		f.Add(AppendBatch(nil, &b))
	}
	earlier := AppendBatch(nil, &pluginBatches(f)[3])
	f.Fuzz(func(t *testing.T, in []byte) {
		var general Batch
		generalErr, panicked := decodeBatchRecovering(in, &general)
		if panicked {
			// The reflection codec, which reads Batch.Agent, panics on
			// some input (msgpack v5.4.1: nil for a struct field); the
			// decoder must turn that into an error.
			t.Fatalf("decoding % x panicked", in)
		}
		var fast Batch
		if decodeBatchFast(in, &fast, nil) {
			if generalErr != nil {
				t.Fatalf("the fast path takes % x, which the general decoder refuses: %v", in, generalErr)
			}
			if !sameBatch(&fast, &general) {
				t.Fatalf("decodings of % x differ:\n fast    %+v\n general %+v", in, fast, general)
			}
		}
		var reused Batch
		if err := DecodeBatch(earlier, &reused); err != nil {
			t.Fatal(err)
		}
		err := DecodeBatchReusing(in, &reused)
		if (err == nil) != (generalErr == nil) {
			t.Fatalf("DecodeBatchReusing of % x: %v; the general decoder: %v", in, err, generalErr)
		}
		if err == nil && !sameBatch(&reused, &general) {
			t.Fatalf("decodings of % x into an earlier batch differ:\n reused  %+v\n general %+v", in, reused, general)
		}
	})
}

// The batches of a tick take the fast path.
func TestBatchFastPathTakesTicks(t *testing.T) {
	for i, b := range pluginBatches(t)[:5] {
		var got Batch
		if !decodeBatchFast(AppendBatch(nil, &b), &got, nil) {
			t.Errorf("batch %d: the fast path gives up", i)
		}
	}
}

func decodeBatchRecovering(in []byte, b *Batch) (err error, panicked bool) {
	defer func() {
		if recover() != nil {
			panicked = true
		}
	}()
	return decodeBatch(in, b), false
}
