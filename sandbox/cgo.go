//go:build cgo

package sandbox

// CgoWarning is what a binary built with cgo should tell its operator: its
// sandbox helper makes threads with pthread_create, whose stacks of 8 MiB
// count against a skill's memory limit, and on a loaded machine a new
// thread between the limits and the exec can be refused ("runtime/cgo:
// pthread_create failed"). A static build (CGO_ENABLED=0, as `make build`
// builds kairo) has no such threads. "" when built without cgo.
const CgoWarning = "this kairo was built with cgo: its sandbox helper may fail under a skill's memory limit on a loaded machine; build it with CGO_ENABLED=0 (make build does)"
