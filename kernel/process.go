package kernel

import (
	"context"
	"encoding/base64"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/manifests"
	"github.com/vmihailenco/msgpack/v5"
	"golang.org/x/sys/unix"
)

// sessionSink streams a process's output to a kernel session until the
// session ends.
type sessionSink struct{ s Session }

func (k *sessionSink) Chunks(cs []abi.StreamChunk) error {
	if err := k.s.Context().Err(); err != nil {
		return err
	}
	return k.s.PushChunks(cs)
}

type attachKey struct {
	proc string
	s    Session
}

func (k *Kernel) registerProcess() {
	for _, m := range []Method{
		{Name: abi.MethodProcessSpawn, Summary: "start a process; its output comes as STREAM_CHUNK", Handler: k.spawn},
		{Name: abi.MethodProcessStdinWrite, Summary: "write to a process's stdin, or close it", Handler: k.stdinWrite},
		{Name: abi.MethodProcessWait, Summary: "wait for a process to exit", Handler: k.wait},
		{Name: abi.MethodProcessStatus, Summary: "a process session, or all of the caller's", Handler: k.status},
		{Name: abi.MethodProcessSignal, Summary: "send a signal to a process tree", Handler: k.signal},
		{Name: abi.MethodProcessKill, Summary: "SIGKILL a process tree", Handler: k.sig(syscall.SIGKILL)},
		{Name: abi.MethodProcessPause, Summary: "SIGSTOP a process tree", Handler: k.sig(syscall.SIGSTOP)},
		{Name: abi.MethodProcessResume, Summary: "SIGCONT a process tree", Handler: k.sig(syscall.SIGCONT)},
		{Name: abi.MethodProcessResize, Summary: "set a PTY's window size", Handler: k.resize},
		{Name: abi.MethodProcessAttach, Summary: "receive a process's output and steer it too", Handler: k.attach},
		{Name: abi.MethodIntentCancel, Summary: "end every process of a run loop", Handler: k.cancel},
	} {
		k.Register(m)
	}
}

func (k *Kernel) spawn(ctx context.Context, c *Call) (any, error) {
	var p abi.SpawnParams
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	caller := c.Session.Caller()
	var spec proc.Spec
	var err error
	switch caller.Kind {
	case KindOperator, KindHost:
		spec, err = k.operatorSpec(&p)
	default:
		spec, err = k.attenuate(caller, &p)
	}
	if err != nil {
		return nil, err
	}
	var used func(string)
	var release func()
	if p.Approval != "" {
		// The grants a person approved for one run of this skill, after
		// the sandbox refused them: added to its policy, and spent.
		if spec.Skill == "" {
			return nil, abi.Errorf(abi.CodeInvalidParams, "approval %q: an approval's grants are for a run of an installed skill (give skill)", p.Approval)
		}
		var g abi.Grants
		if g, used, release, err = k.spendApproval(caller, p.Approval, spec.Skill); err != nil {
			return nil, err
		}
		withGrants(&spec, g)
		spec.Approval = p.Approval
	}
	s, err := k.Proc.Spawn(spec, c.Session, &sessionSink{c.Session})
	if err != nil {
		if release != nil {
			release()
		}
		return nil, abi.Errorf(abi.CodeInvalidParams, "%v", err)
	}
	if used != nil {
		used(s.ID())
	}
	if spec.Secrets != nil {
		k.recordSecrets(ctx, s.ID(), spec.Skill, spec.CorrelationID, spec.Secrets.Uses)
	}
	return s.Info(), nil
}

// operatorSpec is the spec of the operator's spawn p: any manifest, any
// folder, as the operator's own configuration or command line asks.
func (k *Kernel) operatorSpec(p *abi.SpawnParams) (proc.Spec, error) {
	var skill *manifests.Skill
	var err error
	switch {
	case p.Manifest != "" && p.Skill != "":
		return proc.Spec{}, abi.Errorf(abi.CodeInvalidParams, "give manifest (a skill.toml) or skill (an installed skill's name), not both")
	case p.Manifest != "":
		if !filepath.IsAbs(p.Manifest) {
			return proc.Spec{}, abi.Errorf(abi.CodeInvalidParams, "manifest %q: give the skill.toml as an absolute path", p.Manifest)
		}
		if skill, err = manifests.LoadSkill(p.Manifest); err != nil {
			return proc.Spec{}, abi.Errorf(abi.CodeInvalidParams, "%v", err)
		}
	case p.Skill != "":
		if skill, err = k.installedSkill(p.Skill); err != nil {
			return proc.Spec{}, err
		}
	default:
		return k.commandSpec(p), nil
	}
	return k.skillRun(skill, p)
}

// commandSpec is the spec of a spawn of p's argv under the default profile.
func (k *Kernel) commandSpec(p *abi.SpawnParams) proc.Spec {
	return proc.Spec{
		Argv: p.Argv, Cwd: p.Cwd, Env: p.Env, PTY: p.PTY, Cols: p.Cols, Rows: p.Rows,
		Mode: p.Mode, MaxChunkBytes: p.MaxChunkBytes, MaxBytesPerSecond: p.MaxBytesPerSecond,
		Encoding: p.Encoding, CorrelationID: p.CorrelationID, CausationID: p.CausationID,
	}
}

// skillRun is the spec of a run of skill with p: the manifest's command,
// grants and limits; the caller's stream settings; the tighter of the two
// output rates.
func (k *Kernel) skillRun(skill *manifests.Skill, p *abi.SpawnParams) (proc.Spec, error) {
	given, err := k.giveSecrets(skill, p)
	if err != nil {
		return proc.Spec{}, err
	}
	spec, err := proc.SkillSpec(skill, p.Params, p.Argv, p.Cwd, p.Env)
	if err != nil {
		return proc.Spec{}, abi.Errorf(abi.CodeInvalidParams, "%v", err)
	}
	if given != nil {
		spec.Secrets, spec.Mask = given, k.mask
	}
	spec.PTY = spec.PTY || p.PTY
	spec.Cols, spec.Rows = p.Cols, p.Rows
	spec.Mode, spec.MaxChunkBytes, spec.Encoding = p.Mode, p.MaxChunkBytes, p.Encoding
	if r := p.MaxBytesPerSecond; r > 0 && (spec.MaxBytesPerSecond == 0 || r < spec.MaxBytesPerSecond) {
		spec.MaxBytesPerSecond = r
	}
	spec.CorrelationID, spec.CausationID = p.CorrelationID, p.CausationID
	return spec, nil
}

// process finds a process the caller may steer: its own, or one it attached to.
func (k *Kernel) process(c *Call, id string) (*proc.Session, error) {
	if id == "" {
		return nil, abi.Errorf(abi.CodeInvalidParams, "processId is empty; process.spawn returned it")
	}
	s, ok := k.Proc.Get(id)
	if !ok {
		return nil, k.noProcess(id, "; process.status lists yours")
	}
	if s.Owner() == c.Session {
		return s, nil
	}
	k.attachMu.Lock()
	_, ok = k.attached[attachKey{id, c.Session}]
	k.attachMu.Unlock()
	if !ok {
		return nil, abi.Errorf(abi.CodePermissionDenied, "permission denied: process %s belongs to another client; process.attach first", id)
	}
	return s, nil
}

// noProcess is the error for a process id this kernel does not run: for
// an id of another host ("pN@OTHER"), that host runs it and only its
// kairo controls it; else there is no such process, and hint may say
// where to look.
func (k *Kernel) noProcess(id, hint string) *abi.Error {
	if host, ok := proc.IDHost(id); ok && host != k.opts.Host {
		here := "which has no host name"
		if k.opts.Host != "" {
			here = strconv.Quote(k.opts.Host)
		}
		return abi.Errorf(abi.CodeNotFound, "process %s runs on host %q, not on this one (%s): control it with the kairo of that host (KAIRO_HOME there, or its socket)", id, host, here)
	}
	return abi.Errorf(abi.CodeNotFound, "no process %q%s", id, hint)
}

func (k *Kernel) stdinWrite(ctx context.Context, c *Call) (any, error) {
	var p abi.StdinParams
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	s, err := k.process(c, p.ProcessID)
	if err != nil {
		return nil, err
	}
	data := p.Data
	switch p.Encoding {
	case "", "utf8":
	case "base64":
		if data, err = base64.StdEncoding.DecodeString(string(p.Data)); err != nil {
			return nil, abi.Errorf(abi.CodeInvalidParams, "data is not base64: %v", err)
		}
	default:
		return nil, abi.Errorf(abi.CodeInvalidParams, "encoding %q: want \"utf8\" or \"base64\"", p.Encoding)
	}
	if len(data) > 0 {
		leave, ok := enterStdin(s)
		if !ok {
			return nil, abi.Errorf(abi.CodeUnavailable, "stdin of %s is full: the process is not reading; retry once the write in flight returns", s.ID())
		}
		// ctx is the caller's session: a client that hangs up abandons
		// the write and frees what it held.
		err := s.WriteStdinContext(ctx, data)
		leave()
		if err != nil {
			return nil, abi.Errorf(abi.CodeUnavailable, "%v", err)
		}
	}
	if p.Close {
		if err := s.CloseStdin(); err != nil {
			return nil, abi.Errorf(abi.CodeUnavailable, "close stdin of %s: %v", s.ID(), err)
		}
	}
	return struct{}{}, nil
}

func (k *Kernel) wait(ctx context.Context, c *Call) (any, error) {
	var p abi.WaitParams
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	s, err := k.process(c, p.ProcessID)
	if err != nil {
		return nil, err
	}
	if p.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.Timeout)
		defer cancel()
	}
	info, err := s.Wait(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return abi.WaitResult{Process: info, TimedOut: true}, nil
	}
	if err != nil {
		return nil, err
	}
	return abi.WaitResult{Process: info}, nil
}

func (k *Kernel) status(ctx context.Context, c *Call) (any, error) {
	var p abi.ProcessRef
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	if p.ProcessID != "" {
		s, ok := k.Proc.Get(p.ProcessID)
		if !ok {
			return nil, k.noProcess(p.ProcessID, "; process.status lists yours")
		}
		if !k.sameUser(c, s) {
			return nil, abi.Errorf(abi.CodePermissionDenied, "permission denied: process %s belongs to another user", s.ID())
		}
		return s.Info(), nil
	}
	// The list shows what the caller could attach to: its user's
	// processes; steering them still takes ownership or process.attach.
	mine := []abi.ProcessInfo{}
	for _, info := range k.Proc.List() {
		if s, ok := k.Proc.Get(info.ID); ok && k.sameUser(c, s) {
			mine = append(mine, info)
		}
	}
	return mine, nil
}

// sameUser reports whether the caller may see and attach to s: its owner,
// or an operator of the owner's uid (root sees every process). Only the
// operator looks past its own: a skill, plugin or the agent sees what it
// spawned, whatever uid the daemon lends it.
func (k *Kernel) sameUser(c *Call, s *proc.Session) bool {
	if s.Owner() == c.Session {
		return true
	}
	owner, ok := s.Owner().(Session)
	me := c.Session.Caller()
	if !ok || me.Kind != KindOperator {
		return false
	}
	return me.UID == 0 || (owner.Caller().Kind == KindOperator && me.UID == owner.Caller().UID)
}

func (k *Kernel) sig(sig syscall.Signal) Handler {
	return func(ctx context.Context, c *Call) (any, error) {
		var p abi.ProcessRef
		if err := c.Decode(&p); err != nil {
			return nil, err
		}
		return k.sendSignal(c, p.ProcessID, sig)
	}
}

func (k *Kernel) signal(ctx context.Context, c *Call) (any, error) {
	var p abi.SignalParams
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	sig, err := parseSignal(p.Signal)
	if err != nil {
		return nil, err
	}
	return k.sendSignal(c, p.ProcessID, sig)
}

func (k *Kernel) sendSignal(c *Call, id string, sig syscall.Signal) (any, error) {
	s, err := k.process(c, id)
	if err != nil {
		return nil, err
	}
	if err := s.Signal(sig); err != nil {
		return nil, abi.Errorf(abi.CodeUnavailable, "%v", err)
	}
	return s.Info(), nil
}

// parseSignal reads "TERM", "SIGTERM" or "15".
func parseSignal(name string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(name); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), nil
	}
	up := strings.ToUpper(name)
	if !strings.HasPrefix(up, "SIG") {
		up = "SIG" + up
	}
	if sig := unix.SignalNum(up); sig != 0 {
		return sig, nil
	}
	return 0, abi.Errorf(abi.CodeInvalidParams, "signal %q: give a name such as \"TERM\" or \"SIGINT\", or a number", name)
}

func (k *Kernel) resize(ctx context.Context, c *Call) (any, error) {
	var p abi.ResizeParams
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	s, err := k.process(c, p.ProcessID)
	if err != nil {
		return nil, err
	}
	if err := s.Resize(p.Cols, p.Rows); err != nil {
		return nil, abi.Errorf(abi.CodeInvalidParams, "%v", err)
	}
	return s.Info(), nil
}

// attach lets a client of the same user as the owner receive a process's
// output from now on and steer it like its owner.
func (k *Kernel) attach(ctx context.Context, c *Call) (any, error) {
	var p abi.ProcessRef
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	s, ok := k.Proc.Get(p.ProcessID)
	if !ok {
		return nil, k.noProcess(p.ProcessID, "")
	}
	if !k.sameUser(c, s) {
		return nil, abi.Errorf(abi.CodePermissionDenied, "permission denied: process %s belongs to another user", s.ID())
	}
	key := attachKey{s.ID(), c.Session}
	k.attachMu.Lock()
	_, dup := k.attached[key]
	sink := &sessionSink{c.Session}
	if !dup {
		k.attached[key] = sink
	}
	k.attachMu.Unlock()
	if !dup {
		s.Attach(sink)
		go func() { // owned by the attachment: ends with the session
			<-c.Session.Context().Done()
			s.Detach(sink)
			k.attachMu.Lock()
			delete(k.attached, key)
			k.attachMu.Unlock()
		}()
	}
	info := s.Info()
	if info.Status != abi.ProcessRunning {
		// Attached after the end: what it said last is all there is.
		info.LastLines, info.Lines = s.LastLines()
	}
	return info, nil
}

func (k *Kernel) cancel(ctx context.Context, c *Call) (any, error) {
	var p abi.CancelParams
	if err := c.Decode(&p); err != nil {
		return nil, err
	}
	if p.CorrelationID == "" {
		return nil, abi.Errorf(abi.CodeInvalidParams, "correlationId is empty: name the run loop to cancel")
	}
	caller := c.Session.Caller()
	if caller.Kind == KindSkill {
		// A skill cancels its own run loop, no other.
		var own string
		if caller.Tree != nil {
			if root := caller.Tree.Root(); root != nil {
				own = root.Info().CorrelationID
			}
		}
		if own == "" || own != p.CorrelationID {
			return nil, abi.Errorf(abi.CodePermissionDenied, "permission denied: %s may cancel only its own run loop (%s)", caller, orNone(own))
		}
	}
	if p.Reason == "" {
		p.Reason = "intent.cancel by " + caller.String()
	}
	// The request goes on the bus first, as the kernel's word for who
	// asked: the agent closes the run loop on it (its own cancels it
	// records itself).
	if caller.Kind != KindAgent {
		raw, err := msgpack.Marshal(abi.CancelParams{CorrelationID: p.CorrelationID, Reason: p.Reason})
		if err != nil {
			return nil, err
		}
		ev := &abi.Event{Type: abi.SubjectIntentCancel, Source: caller.Source(), Data: raw, CorrelationID: p.CorrelationID}
		if _, err := k.Bus.Publish(ctx, ev); err != nil {
			return nil, err
		}
	}
	ids := k.Proc.Cancel(p.CorrelationID, p.Reason)
	if ids == nil {
		ids = []string{}
	}
	return abi.CancelResult{ProcessIDs: ids}, nil
}

func orNone(s string) string {
	if s == "" {
		return "it has none"
	}
	return s
}
