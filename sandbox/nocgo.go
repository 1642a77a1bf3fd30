//go:build !cgo

package sandbox

// CgoWarning is "" in a static build; see cgo.go.
const CgoWarning = ""
