package manifests

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Size
	}{
		{"0", 0},
		{"4096", 4096},
		{"4096B", 4096},
		{"16MiB", 16 << 20},
		{"16mib", 16 << 20},
		{"16 MiB", 16 << 20},
		{"512KiB", 512 << 10},
		{"1GB", 1_000_000_000},
		{"1kB", 1000},
		{"2TiB", 2 << 40},
		{"1.5KiB", 1536},
		{"1_048_576", 1 << 20},
		{" 8MiB ", 8 << 20},
	} {
		got, err := ParseSize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestParseSizeErrors(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"", "want a number of bytes"},
		{"MiB", "want a number of bytes"},
		{"-1MiB", "want a number of bytes"},
		{"16M", `unknown unit "M"`},
		{"16 furlongs", `unknown unit "furlongs"`},
		{"1.5B", "not a whole number of bytes"},
		{"1.2.3KiB", "is not a number"},
		{"99999999999999999999", "too large"},
		{"20000000TiB", "too large"},
	} {
		_, err := ParseSize(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseSize(%q) error = %v; want it to contain %q", tc.in, err, tc.want)
		}
	}
}

func TestSizeString(t *testing.T) {
	for _, tc := range []struct {
		in   Size
		want string
	}{
		{0, "0B"},
		{1000, "1000B"},
		{KiB, "1KiB"},
		{16 * MiB, "16MiB"},
		{1536, "1536B"},
		{3 * GiB, "3GiB"},
	} {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("Size(%d).String() = %q, want %q", uint64(tc.in), got, tc.want)
		}
		if back, err := ParseSize(tc.in.String()); err != nil || back != tc.in {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in.String(), back, err, uint64(tc.in))
		}
	}
}
