package sandbox

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// bpfAsm assembles a classic BPF program with symbolic jump targets.
// Conditional jumps in classic BPF carry 8-bit forward offsets, which are
// tedious and fragile to count by hand; the assembler records labels and
// resolves every offset in assemble, refusing a backward jump, an unbound
// label or a conditional jump farther than 255 instructions.
//
// Methods record the first misuse (a label bound twice) and assemble reports
// it, so a program can be written as a straight list of calls.
type bpfAsm struct {
	insns  []unix.SockFilter
	fixups []bpfFixup
	addr   []int // instruction index of each label; -1 until bound
	err    error
}

// bpfLabel names a place in the program. The zero label is bpfNext: the
// instruction that follows, which is how a conditional jump falls through.
type bpfLabel int

const bpfNext bpfLabel = 0

// bpfFixup is a jump whose offsets assemble fills in.
type bpfFixup struct {
	at     int      // index of the jump instruction
	jt, jf bpfLabel // targets of a conditional jump; jt alone for BPF_JA
}

// bpfMaxJump is the farthest a conditional jump reaches: its offsets are
// uint8.
const bpfMaxJump = 255

// bpfMaxInsns is the kernel's limit on the length of a program (BPF_MAXINSNS).
const bpfMaxInsns = 4096

func (a *bpfAsm) newLabel() bpfLabel {
	if len(a.addr) == 0 {
		a.addr = append(a.addr, -1) // slot of bpfNext, never bound
	}
	a.addr = append(a.addr, -1)
	return bpfLabel(len(a.addr) - 1)
}

// bind places l at the next instruction.
func (a *bpfAsm) bind(l bpfLabel) {
	switch {
	case l == bpfNext || int(l) >= len(a.addr):
		a.fail(fmt.Errorf("bpf: bind of unknown label %d", l))
	case a.addr[l] >= 0:
		a.fail(fmt.Errorf("bpf: label %d bound twice", l))
	default:
		a.addr[l] = len(a.insns)
	}
}

// load puts the 32-bit word at offset off of the input (struct
// seccomp_data) into the accumulator.
func (a *bpfAsm) load(off uint32) {
	a.emit(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, off)
}

// and masks the accumulator with k.
func (a *bpfAsm) and(k uint32) {
	a.emit(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, k)
}

// ret ends the program with verdict k.
func (a *bpfAsm) ret(k uint32) {
	a.emit(unix.BPF_RET|unix.BPF_K, k)
}

// jeq goes to jt if the accumulator equals k, else to jf.
func (a *bpfAsm) jeq(k uint32, jt, jf bpfLabel) { a.jump(unix.BPF_JEQ, k, jt, jf) }

// jge goes to jt if the accumulator is at least k (unsigned), else to jf.
func (a *bpfAsm) jge(k uint32, jt, jf bpfLabel) { a.jump(unix.BPF_JGE, k, jt, jf) }

// jset goes to jt if the accumulator has any bit of k set, else to jf.
func (a *bpfAsm) jset(k uint32, jt, jf bpfLabel) { a.jump(unix.BPF_JSET, k, jt, jf) }

// goTo jumps unconditionally; its offset is 32 bits wide.
func (a *bpfAsm) goTo(l bpfLabel) {
	a.fixups = append(a.fixups, bpfFixup{at: len(a.insns), jt: l})
	a.emit(unix.BPF_JMP|unix.BPF_JA, 0)
}

func (a *bpfAsm) jump(op uint16, k uint32, jt, jf bpfLabel) {
	a.fixups = append(a.fixups, bpfFixup{at: len(a.insns), jt: jt, jf: jf})
	a.emit(unix.BPF_JMP|op|unix.BPF_K, k)
}

func (a *bpfAsm) emit(code uint16, k uint32) {
	a.insns = append(a.insns, unix.SockFilter{Code: code, K: k})
}

func (a *bpfAsm) fail(err error) {
	if a.err == nil {
		a.err = err
	}
}

// assemble resolves every jump and returns the program.
func (a *bpfAsm) assemble() ([]unix.SockFilter, error) {
	if a.err != nil {
		return nil, a.err
	}
	if n := len(a.insns); n == 0 || n > bpfMaxInsns {
		return nil, fmt.Errorf("bpf: program has %d instructions; the kernel takes 1 to %d", n, bpfMaxInsns)
	}
	if last := a.insns[len(a.insns)-1]; last.Code != unix.BPF_RET|unix.BPF_K {
		return nil, fmt.Errorf("bpf: program does not end in a return")
	}
	prog := make([]unix.SockFilter, len(a.insns))
	copy(prog, a.insns)
	for _, f := range a.fixups {
		jt, err := a.offset(f.at, f.jt)
		if err != nil {
			return nil, err
		}
		if prog[f.at].Code == unix.BPF_JMP|unix.BPF_JA {
			prog[f.at].K = uint32(jt)
			continue
		}
		jf, err := a.offset(f.at, f.jf)
		if err != nil {
			return nil, err
		}
		if jt > bpfMaxJump || jf > bpfMaxJump {
			return nil, fmt.Errorf("bpf: conditional jump at instruction %d spans %d instructions; the limit is %d",
				f.at, max(jt, jf), bpfMaxJump)
		}
		prog[f.at].Jt, prog[f.at].Jf = uint8(jt), uint8(jf)
	}
	return prog, nil
}

// offset is the distance from the jump at index at to label l, counted from
// the instruction after the jump, as BPF counts it.
func (a *bpfAsm) offset(at int, l bpfLabel) (int, error) {
	if l == bpfNext {
		return 0, nil
	}
	if l < 0 || int(l) >= len(a.addr) {
		return 0, fmt.Errorf("bpf: jump at instruction %d to unknown label %d", at, l)
	}
	to := a.addr[l]
	switch {
	case to < 0:
		return 0, fmt.Errorf("bpf: jump at instruction %d to label %d, which is never bound", at, l)
	case to <= at:
		return 0, fmt.Errorf("bpf: jump at instruction %d goes back to %d; BPF jumps only forward", at, to)
	case to >= len(a.insns):
		return 0, fmt.Errorf("bpf: jump at instruction %d to label %d past the end of the program", at, l)
	}
	return to - at - 1, nil
}
