package manifests

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a byte count written as a number and an optional unit: "16MiB",
// "512KiB", "1GB", "1.5GiB", "4096". Binary units ([KiB], [MiB], [GiB], [TiB]) are
// powers of 1024, decimal ones (kB, MB, GB, TB) powers of 1000; units are
// matched without regard to case, so "16mib" is "16MiB". A bare "K", "M" or
// "G" is refused: tools disagree on whether it means 1000 or 1024. In TOML a
// Size may also be a plain integer.
type Size uint64

// Common sizes.
const (
	KiB Size = 1 << 10
	MiB Size = 1 << 20
	GiB Size = 1 << 30
	TiB Size = 1 << 40
)

var sizeUnits = map[string]Size{
	"": 1, "b": 1,
	"kb": 1000, "kib": KiB,
	"mb": 1000 * 1000, "mib": MiB,
	"gb": 1000 * 1000 * 1000, "gib": GiB,
	"tb": 1000 * 1000 * 1000 * 1000, "tib": TiB,
}

// ParseSize reads a size such as "16MiB". A fractional number is allowed
// when it makes a whole number of bytes ("1.5KiB" is 1536; "1.5B" is an error).
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.' || t[i] == '_') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	if num == "" {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional unit, like \"16MiB\", \"512KiB\", \"1GB\" or \"4096\"", s)
	}
	mult, ok := sizeUnits[unit]
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q; use B, KiB, MiB, GiB, TiB (powers of 1024) or kB, MB, GB, TB (powers of 1000)", s, strings.TrimSpace(t[i:]))
	}
	num = strings.ReplaceAll(num, "_", "")
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseUint(num, 10, 64)
		if err != nil || n > math.MaxUint64/uint64(mult) {
			return 0, fmt.Errorf("size %q is too large or not a number", s)
		}
		return Size(n) * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %q is not a number", s, num)
	}
	b := f * float64(mult)
	if b >= math.MaxUint64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	if b != math.Trunc(b) {
		return 0, fmt.Errorf("size %q is not a whole number of bytes", s)
	}
	return Size(b), nil
}

// String writes the size in the largest binary unit that divides it:
// 16777216 is "16MiB", 1000 is "1000B".
func (s Size) String() string {
	for _, u := range []struct {
		name string
		size Size
	}{{"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}} {
		if s >= u.size && s%u.size == 0 {
			return strconv.FormatUint(uint64(s/u.size), 10) + u.name
		}
	}
	return strconv.FormatUint(uint64(s), 10) + "B"
}

// UnmarshalText lets TOML (and JSON) read a [Size] from a string or an integer.
func (s *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// MarshalText writes the size as String does.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
