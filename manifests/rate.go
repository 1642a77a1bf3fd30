package manifests

import (
	"fmt"
	"strconv"
	"strings"
)

// Rate is a number of bytes per second, written as a size and "/s":
// "256KiB/s", "1MB/s", "4096B/s". A plain number without a unit ("4096",
// or an integer in TOML) is bytes per second too.
type Rate uint64

// ParseRate reads a rate such as "256KiB/s"; see [Rate] and [ParseSize].
func ParseRate(s string) (Rate, error) {
	t := strings.TrimSpace(s)
	if strings.HasSuffix(strings.ToLower(t), "/s") {
		n, err := ParseSize(t[:len(t)-2])
		if err != nil {
			return 0, fmt.Errorf("rate %q: %v; %s", s, err, rateFormat)
		}
		return Rate(n), nil
	}
	n, err := strconv.ParseUint(strings.ReplaceAll(t, "_", ""), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("rate %q: %s", s, rateFormat)
	}
	return Rate(n), nil
}

const rateFormat = `want a size per second, such as "256KiB/s" or "1MB/s", or a plain number of bytes per second`

// String writes the rate as a [Size] per second: 262144 is "256KiB/s".
func (r Rate) String() string { return Size(r).String() + "/s" }

// UnmarshalText lets TOML (and JSON) read a [Rate] from a string or an integer.
func (r *Rate) UnmarshalText(b []byte) error {
	v, err := ParseRate(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// MarshalText writes the rate as String does.
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }
