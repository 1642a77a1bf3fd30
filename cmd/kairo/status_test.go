package main

import "testing"

func TestHumanBytes(t *testing.T) {
	for n, want := range map[uint64]string{
		0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 98259 << 10: "96.0 MiB",
		3 << 30: "3.0 GiB", 1536: "1.5 KiB",
	} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
