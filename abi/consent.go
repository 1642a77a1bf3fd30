package abi

import "time"

// Consent: what the sandbox refused a process tree (kairo.sandbox.denied),
// and the approvals a person gives or refuses (kairo.approval.requested,
// kairo.approval.decided). The subjects are in subjects.go; the kernel
// publishes all three, and nobody else may.

// Denial operations: what a sandboxed tree tried and was refused. The
// filesystem and TCP ones are Landlock's (read from the audit subsystem),
// [DeniedHost] is the egress proxy's, [DeniedSyscall] the seccomp filter's.
const (
	DeniedRead       = "fs.read"         // reading a file or listing a folder
	DeniedWrite      = "fs.write"        // creating, changing, renaming or removing
	DeniedExec       = "fs.exec"         // executing a file
	DeniedConnectTCP = "net.connect_tcp" // a TCP connect to a port
	DeniedBindTCP    = "net.bind_tcp"    // a TCP bind to a port
	DeniedHost       = "net.host"        // a host name the egress proxy refused
	DeniedSyscall    = "syscall"         // a system call the seccomp filter refused
	DeniedOther      = "other"           // a refusal of another kind (signal, abstract socket, ...)
)

// SandboxDenied is the data of kairo.sandbox.denied: one kind of refusal
// of one process tree. Refusals of the same operation on the same object
// by a tree are coalesced: Count says how many the event stands for, and
// a tree that keeps hitting one makes one event, not one per hit.
type SandboxDenied struct {
	// ProcessID is the tree's process the kernel knows: the process that
	// was refused, or the root of its tree when the refused process is a
	// descendant the kernel did not spawn.
	ProcessID string `msgpack:"processId"`
	PID       int    `msgpack:"pid,omitempty"` // the refused process, when known
	Skill     string `msgpack:"skill,omitempty"`
	Op        string `msgpack:"op"`     // a Denied* value
	Object    string `msgpack:"object"` // the path, "host:port", the port, the system call
	// Detail is the reporter's own words: Landlock's blockers
	// ("fs.make_reg"), the proxy's reason.
	Detail string `msgpack:"detail,omitempty"`
	Count  int    `msgpack:"count"`
	// Grant is the manifest line that would allow it, when one would
	// ("[fs] write = [\"/etc\"]"); empty for what no grant allows.
	Grant string `msgpack:"grant,omitempty"`
	// Reporter is who saw it: "landlock", "seccomp", "egress".
	Reporter string `msgpack:"reporter"`
}

// SandboxAudit is the data of kairo.sandbox.audit: the audit subsystem as
// a daemon found and left it at its start, and whether the sandbox's
// refusals are reported.
type SandboxAudit struct {
	// Enabled says audit is on now.
	Enabled bool `msgpack:"enabled"`
	// ByKairo says it is on because a kairo turned it on; the last kairo
	// of the machine to stop turns it off again.
	ByKairo bool `msgpack:"byKairo"`
	// TurnedOn says this daemon turned it on.
	TurnedOn bool `msgpack:"turnedOn"`
	// Previous is how audit was before any kairo turned it on: "off",
	// "on" or "locked".
	Previous string `msgpack:"previous,omitempty"`
	// Reporting says the sandbox's refusals are read and published as
	// kairo.sandbox.denied; Reason says why not, when they are not.
	Reporting bool   `msgpack:"reporting"`
	Reason    string `msgpack:"reason,omitempty"`
}

// [Approval] modes: when a tool or a skill needs a person's yes.
const (
	ApprovalAlways = "always" // before every run
	// ApprovalOnDeny runs it sandboxed; when the sandbox refused it
	// something, a person is asked to run it again with exactly that
	// grant added, once.
	ApprovalOnDeny = "on-deny"
	ApprovalNever  = "never" // the default
)

// Grants is what an approval adds to a skill's manifest for one run: the
// grants a refusal showed missing. Empty for an approval of a run as is.
type Grants struct {
	Read       []string `msgpack:"read,omitempty"`
	Write      []string `msgpack:"write,omitempty"`
	Exec       []string `msgpack:"exec,omitempty"`
	ConnectTCP []uint16 `msgpack:"connectTcp,omitempty"`
	BindTCP    []uint16 `msgpack:"bindTcp,omitempty"`
	Hosts      []string `msgpack:"hosts,omitempty"`
}

// Empty reports whether g adds nothing.
func (g Grants) Empty() bool {
	return len(g.Read)+len(g.Write)+len(g.Exec)+len(g.ConnectTCP)+len(g.BindTCP)+len(g.Hosts) == 0
}

// ApprovalRequest is approval.request's params and, completed by the
// kernel, the data of kairo.approval.requested: an action waiting for a
// person.
type ApprovalRequest struct {
	// ID is the kernel's: "ap-" and the action's id, with "-rerun" for
	// the re-run of a refused one. A request made again for the same
	// action and mode is the same approval.
	ID            string `msgpack:"id,omitempty"`
	ActionID      string `msgpack:"actionId"`
	CorrelationID string `msgpack:"correlationId,omitempty"` // the run loop
	Tool          string `msgpack:"tool"`
	Args          string `msgpack:"args,omitempty"` // the call's JSON arguments
	Mode          string `msgpack:"mode"`           // ApprovalAlways or ApprovalOnDeny
	// Skill is the installed skill the action runs, when it runs one: an
	// approved on-deny request lets one spawn of it hold Grants.
	Skill  string `msgpack:"skill,omitempty"`
	Grants Grants `msgpack:"grants,omitempty"`
	// Reason says, in a line, why a person is asked: "skill.fetch needs
	// approval before it runs", "denied: fs.write /etc".
	Reason string `msgpack:"reason"`
	// Set by the kernel: who asked, and until when a decision is awaited
	// (past it the request is denied).
	Requester string    `msgpack:"requester,omitempty"`
	Expires   time.Time `msgpack:"expires,omitempty"`
}

// ApprovalDecision is approval.decide's params and, completed by the
// kernel, the data of kairo.approval.decided.
type ApprovalDecision struct {
	ID       string `msgpack:"id"`
	Approved bool   `msgpack:"approved"`
	Reason   string `msgpack:"reason,omitempty"`
	// MessageID, for the agent only: the user's chat message ("yes",
	// "no") the decision is taken from; the kernel checks it is the
	// operator's.
	MessageID string `msgpack:"messageId,omitempty"`
	// Withdrawn says the requester took the request back: the run loop
	// that asked was canceled or ended, so the action will never run and
	// nobody is left to approve it for. Only the requester withdraws, and
	// only a pending request; Approved is then false.
	Withdrawn bool `msgpack:"withdrawn,omitempty"`
	// Set by the kernel: who decided ("operator/0", "timeout"), the
	// request's action.
	By       string `msgpack:"by,omitempty"`
	ActionID string `msgpack:"actionId,omitempty"`
}

// [Approval] states, as approval.list reports them.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	// ApprovalWithdrawn: the requester took it back before anyone
	// decided (its run loop ended); a later decision changes nothing.
	ApprovalWithdrawn = "withdrawn"
)

// Approval is one approval as approval.list and approval.decide report it.
type Approval struct {
	ApprovalRequest
	State       string            `msgpack:"state"` // an Approval* state
	RequestedAt time.Time         `msgpack:"requestedAt"`
	Decided     *ApprovalDecision `msgpack:"decided,omitempty"`
	// Used says the approved grants were spent by a spawn (ProcessID).
	UsedBy string `msgpack:"usedBy,omitempty"`
	// Already is set on an answer to approval.decide for an approval that
	// was decided before: the decision shown is the first, and the call
	// changed nothing.
	Already bool `msgpack:"already,omitempty"`
}

// ApprovalListParams is approval.list: pending ones only, unless All.
type ApprovalListParams struct {
	All bool `msgpack:"all,omitempty"`
}

// ApprovalListResult answers approval.list, oldest first.
type ApprovalListResult struct {
	Approvals []Approval `msgpack:"approvals"`
}
