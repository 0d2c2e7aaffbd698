//go:build linux && (amd64 || arm64)

package seccomp

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// label names a position in the program being built. The empty label means
// "the next instruction".
type label string

// Labels used by Filter (lX32 is in arch_amd64.go).
const (
	lAllow           label = "allow"
	lEPERM           label = "eperm"
	lENOSYS          label = "enosys"
	lEAFNOSUPPORT    label = "eafnosupport"
	lEPROTONOSUPPORT label = "eprotonosupport"
	lEOPNOTSUPP      label = "eopnotsupp"
	lKill            label = "kill"
	lClone           label = "clone"
	lPersonality     label = "personality"
	lIoctl           label = "ioctl"
	lSocket          label = "socket"
	lInet            label = "inet"
	lNetlink         label = "netlink"
	lSocketpair      label = "socketpair"
	lMemfd           label = "memfd"
	lExecveat        label = "execveat"
)

// maxInstructions is BPF_MAXINSNS, the longest program the kernel loads.
const maxInstructions = 4096

// errBadJump reports a jump to an undefined, backward or too distant label.
var errBadJump = errors.New("bad jump")

// Classic BPF opcodes (linux/filter.h), the only ones the filter uses.
const (
	opLoadAbsWord = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	opAndConst    = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	opRetConst    = unix.BPF_RET | unix.BPF_K
	opJumpEqual   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	opJumpSet     = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	opJumpGE      = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
)

// builder is a small assembler for classic BPF with forward-only symbolic
// jumps, resolved to the 8-bit relative offsets of conditional jumps by
// assemble. It emits the kernel's encoding directly.
type builder struct {
	prog     []bpf.RawInstruction
	targets  []jumpTarget // every conditional jump, in program order
	labels   map[label]int
	deferred []deferredBlock
}

// jumpTarget is a conditional jump's index in the program and its {true, false} labels.
type jumpTarget struct {
	at   int
	dest [2]label
}

// deferredBlock is a labelled block emitted after the syscall dispatch.
type deferredBlock struct {
	name label
	emit func()
}

// newBuilder returns an empty builder.
func newBuilder() *builder {
	return &builder{prog: make([]bpf.RawInstruction, 0, 256), targets: make([]jumpTarget, 0, 128), labels: map[label]int{}}
}

// ld loads the 32-bit word at off in struct seccomp_data into A.
func (b *builder) ld(off uint32) {
	b.prog = append(b.prog, bpf.RawInstruction{Op: opLoadAbsWord, K: off})
}

// and computes A &= k.
func (b *builder) and(k uint32) {
	b.prog = append(b.prog, bpf.RawInstruction{Op: opAndConst, K: k})
}

// ret returns the seccomp action v.
func (b *builder) ret(v uint32) {
	b.prog = append(b.prog, bpf.RawInstruction{Op: opRetConst, K: v})
}

// jeq jumps to t if A == k and to f otherwise.
func (b *builder) jeq(k uint32, t, f label) { b.jump(opJumpEqual, k, t, f) }

// jset jumps to t if A & k != 0 and to f otherwise.
func (b *builder) jset(k uint32, t, f label) { b.jump(opJumpSet, k, t, f) }

// jump emits a conditional jump whose offsets assemble fills in.
func (b *builder) jump(op uint16, k uint32, t, f label) {
	b.targets = append(b.targets, jumpTarget{len(b.prog), [2]label{t, f}})
	b.prog = append(b.prog, bpf.RawInstruction{Op: op, K: k})
}

// jge jumps to t if A >= k (unsigned) and to f otherwise.
func (b *builder) jge(k uint32, t, f label) { b.jump(opJumpGE, k, t, f) }

// dispatchEntry sends one syscall number to a label.
type dispatchEntry struct {
	nr uint32
	to label
}

// dispatchTable is the syscall numbers a filter looks at, each with its label.
type dispatchTable []dispatchEntry

// add sends nr to l, unless nr is in the table already (the first entry counts).
func (t *dispatchTable) add(nr uint32, l label) {
	if !slices.ContainsFunc(*t, func(e dispatchEntry) bool { return e.nr == nr }) {
		*t = append(*t, dispatchEntry{nr, l})
	}
}

// leafEntries is the most entries dispatch compares one by one.
const leafEntries = 4

// dispatch emits, with the syscall number in A, a binary search over table: a number in it jumps
// to its label, any other returns ALLOW. A syscall so passes about log2(len(table)) comparisons
// instead of one per entry, and so does the kernel when it installs the filter: it runs the
// program for every syscall number to find those it always allows (the per-syscall action cache),
// which costs a chain of comparisons that many times over.
func (b *builder) dispatch(table dispatchTable) {
	b.searchTree(slices.SortedFunc(slices.Values(table), func(x, y dispatchEntry) int { return cmp.Compare(x.nr, y.nr) }))
}

// searchTree emits the search over entries, sorted by number.
func (b *builder) searchTree(entries []dispatchEntry) {
	if len(entries) <= leafEntries {
		for _, e := range entries {
			b.jeq(e.nr, e.to, "")
		}
		b.ret(unix.SECCOMP_RET_ALLOW)
		return
	}
	mid := len(entries) / 2
	upper := label(fmt.Sprintf("ge%d", entries[mid].nr)) // a number is the middle of one range only
	b.jge(entries[mid].nr, upper, "")
	b.searchTree(entries[:mid])
	b.label(upper)
	b.searchTree(entries[mid:])
}

// label binds name to the next instruction.
func (b *builder) label(name label) { b.labels[name] = len(b.prog) }

// deferBlock queues a block to be emitted, under name, by emitDeferred.
func (b *builder) deferBlock(name label, emit func()) {
	b.deferred = append(b.deferred, deferredBlock{name, emit})
}

// emitDeferred emits the queued blocks in the order they were queued.
func (b *builder) emitDeferred() {
	for _, d := range b.deferred {
		b.label(d.name)
		d.emit()
	}
	b.deferred = nil
}

// assemble resolves the symbolic jumps and returns the program.
func (b *builder) assemble() ([]bpf.RawInstruction, error) {
	if len(b.prog) > maxInstructions {
		return nil, fmt.Errorf("program has %d instructions, the kernel accepts %d", len(b.prog), maxInstructions)
	}
	for _, t := range b.targets {
		var err error
		if b.prog[t.at].Jt, err = b.skip(t.at, t.dest[0]); err != nil {
			return nil, err
		}
		if b.prog[t.at].Jf, err = b.skip(t.at, t.dest[1]); err != nil {
			return nil, err
		}
	}
	return b.prog, nil
}

// skip returns the relative offset from the jump at index at to name.
func (b *builder) skip(at int, name label) (uint8, error) {
	if name == "" {
		return 0, nil
	}
	to, ok := b.labels[name]
	if !ok {
		return 0, fmt.Errorf("%w: label %q is not defined", errBadJump, name)
	}
	d := to - at - 1
	if d < 0 || d > 255 {
		return 0, fmt.Errorf("%w: label %q is %d instructions from the jump at %d", errBadJump, name, d, at)
	}
	return uint8(d), nil
}
