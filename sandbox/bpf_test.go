package sandbox

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// seccompInput is struct seccomp_data, the input of a seccomp program.
type seccompInput struct {
	nr   uint32
	arch uint32
	args [6]uint64
}

func (in seccompInput) bytes() []byte {
	b := make([]byte, seccompDataArgs+8*len(in.args))
	binary.LittleEndian.PutUint32(b[seccompDataNr:], in.nr)
	binary.LittleEndian.PutUint32(b[seccompDataArch:], in.arch)
	for i, v := range in.args {
		binary.LittleEndian.PutUint64(b[argLow(uint32(i)):], v)
	}
	return b
}

// bpfRun is the outcome of one run of a program.
type bpfRun struct {
	verdict  uint32
	readArgs bool // a load read past the number and the arch
	steps    int  // instructions executed
}

// runBPF interprets the classic BPF instructions a seccomp filter may use,
// checking what the kernel checks when it loads one. It reports whether the
// run read an argument: the kernel caches "allowed" for a syscall only when
// the filter allows it without reading beyond the number and the arch.
func runBPF(prog []unix.SockFilter, in seccompInput) (bpfRun, error) {
	data := in.bytes()
	var run bpfRun
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		run.steps++
		insn := prog[pc]
		switch insn.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			if insn.K%4 != 0 || int(insn.K)+4 > len(data) {
				return run, fmt.Errorf("pc %d: load at offset %d", pc, insn.K)
			}
			acc = binary.LittleEndian.Uint32(data[insn.K:])
			run.readArgs = run.readArgs || insn.K >= seccompDataArgs
		case unix.BPF_ALU | unix.BPF_AND | unix.BPF_K:
			acc &= insn.K
		case unix.BPF_RET | unix.BPF_K:
			run.verdict = insn.K
			return run, nil
		case unix.BPF_JMP | unix.BPF_JA:
			pc += int(insn.K)
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K,
			unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K,
			unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			var taken bool
			switch insn.Code &^ (unix.BPF_JMP | unix.BPF_K) {
			case unix.BPF_JEQ:
				taken = acc == insn.K
			case unix.BPF_JGE:
				taken = acc >= insn.K
			case unix.BPF_JSET:
				taken = acc&insn.K != 0
			}
			if taken {
				pc += int(insn.Jt)
			} else {
				pc += int(insn.Jf)
			}
		default:
			return run, fmt.Errorf("pc %d: instruction %#x not expected in a seccomp filter", pc, insn.Code)
		}
		if pc+1 >= len(prog) {
			return run, fmt.Errorf("pc %d: jumped past the end of the program", pc)
		}
	}
	return run, fmt.Errorf("ran off the end of the program")
}

func TestBPFAsmResolvesLabels(t *testing.T) {
	var a bpfAsm
	yes, no, skip, three := a.newLabel(), a.newLabel(), a.newLabel(), a.newLabel()
	a.load(seccompDataNr)         // 0
	a.jeq(1, yes, bpfNext)        // 1: to 5 or 2
	a.jset(2, skip, no)           // 2: to 4 or 6
	a.ret(unix.SECCOMP_RET_ALLOW) // 3: unreachable filler
	a.bind(skip)
	a.goTo(three) // 4: to 7
	a.bind(yes)
	a.ret(1) // 5
	a.bind(no)
	a.ret(2) // 6
	a.bind(three)
	a.ret(3) // 7
	prog, err := a.assemble()
	if err != nil {
		t.Fatal(err)
	}
	want := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: seccompDataNr},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 3, Jf: 0, K: 1},
		{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, Jt: 1, Jf: 3, K: 2},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
		{Code: unix.BPF_JMP | unix.BPF_JA, K: 2},
		{Code: unix.BPF_RET | unix.BPF_K, K: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: 2},
		{Code: unix.BPF_RET | unix.BPF_K, K: 3},
	}
	if fmt.Sprint(prog) != fmt.Sprint(want) {
		t.Fatalf("assembled\n%v\nwant\n%v", prog, want)
	}
	for nr, verdict := range map[uint32]uint32{1: 1, 2: 3, 3: 3, 4: 2} {
		run, err := runBPF(prog, seccompInput{nr: nr})
		if err != nil || run.verdict != verdict {
			t.Errorf("nr %d: verdict %d, %v; want %d", nr, run.verdict, err, verdict)
		}
	}
}

func TestBPFAsmRefusesBadJumps(t *testing.T) {
	tests := []struct {
		name  string
		build func(a *bpfAsm)
		want  string
	}{
		{"conditional jump past 255", func(a *bpfAsm) {
			far := a.newLabel()
			a.load(seccompDataNr)
			a.jeq(1, far, bpfNext)
			for range 256 {
				a.ret(0)
			}
			a.bind(far)
			a.ret(1)
		}, "spans 256 instructions"},
		{"unconditional jump past 255 is fine", func(a *bpfAsm) {
			far := a.newLabel()
			a.goTo(far)
			for range 300 {
				a.ret(0)
			}
			a.bind(far)
			a.ret(1)
		}, ""},
		{"conditional jump of exactly 255", func(a *bpfAsm) {
			far := a.newLabel()
			a.jeq(1, bpfNext, far)
			for range 255 {
				a.ret(0)
			}
			a.bind(far)
			a.ret(1)
		}, ""},
		{"unbound label", func(a *bpfAsm) {
			a.jeq(1, a.newLabel(), bpfNext)
			a.ret(0)
		}, "never bound"},
		{"backward jump", func(a *bpfAsm) {
			back := a.newLabel()
			a.bind(back)
			a.load(seccompDataNr)
			a.jeq(1, back, bpfNext)
			a.ret(0)
		}, "goes back"},
		{"jump to itself", func(a *bpfAsm) {
			self := a.newLabel()
			a.bind(self)
			a.goTo(self)
			a.ret(0)
		}, "goes back"},
		{"label at the end", func(a *bpfAsm) {
			end := a.newLabel()
			a.jeq(1, end, bpfNext)
			a.ret(0)
			a.bind(end)
		}, "past the end"},
		{"no final return", func(a *bpfAsm) {
			a.load(seccompDataNr)
		}, "does not end in a return"},
		{"label bound twice", func(a *bpfAsm) {
			l := a.newLabel()
			a.bind(l)
			a.ret(0)
			a.bind(l)
			a.ret(1)
		}, "bound twice"},
		{"bind of bpfNext", func(a *bpfAsm) {
			a.bind(bpfNext)
			a.ret(0)
		}, "unknown label"},
		{"empty program", func(a *bpfAsm) {}, "0 instructions"},
		{"too long", func(a *bpfAsm) {
			for range bpfMaxInsns + 1 {
				a.ret(0)
			}
		}, "4097 instructions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a bpfAsm
			tt.build(&a)
			_, err := a.assemble()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("assemble: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("assemble: error %v, want one saying %q", err, tt.want)
			}
		})
	}
}
