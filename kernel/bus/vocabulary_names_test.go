package bus

import "github.com/kairo-os/kairo/abi"

// The store tests call abi's ids and patterns by the names they had in
// this package.
var (
	NewID              = abi.NewID
	MustCompilePattern = abi.MustCompilePattern
)

func formatUUID(b []byte) string { return abi.FormatUUID([16]byte(b)) }
