package nsinit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// The plan's wire format: what the host writes to the plan pipe and an init or a zygote thread
// reads, both of one build (planProtocol, checked first). Binary rather than JSON: decoding a
// call's plan as JSON (3 KB) took 125–160 µs of the zygote thread's path. Every field of the
// envelope, the plan and its limits is written in declaration order: signed integers and
// durations as varints, unsigned ones as uvarints, a bool as one byte, a string or a list as its
// length plus one (0: nil) and its elements. TestPlanWireCarriesEveryField fills every field by
// reflection and compares the round trip, so a field added to these types and not here fails it.

// errPlanWire is the error of a plan that does not decode: truncated, too long, or malformed.
var errPlanWire = errors.New("malformed plan")

// encodeEnvelope writes e in the plan's wire format.
func encodeEnvelope(e envelope) []byte {
	w := wireWriter{b: make([]byte, 0, 4096)}
	w.int(int64(e.Protocol))
	p := &e.Plan
	w.str(p.Path)
	w.strs(p.Args)
	w.str(p.Dir)
	w.strs(p.Env)
	w.int(int64(p.UID))
	w.int(int64(p.GID))
	w.ints(p.Groups)
	w.int(int64(p.Umask))
	for _, l := range [][]string{p.ReadOnly, p.ReadWrite, p.Exec, p.Protect, p.Absent, p.Deny} {
		w.strs(l)
	}
	w.bool(p.NoNetwork)
	w.bool(p.Egress)
	w.ints(p.Ingress)
	w.str(p.NetworkKey)
	w.bool(p.Seccomp)
	w.int(int64(p.Timeout))
	w.bool(p.NoExecMemfd)
	l := &p.Limits
	for _, v := range []int64{l.MemoryBytes, l.Pids, int64(l.CPU), l.NoFile, l.FileSize, l.TmpfsBytes} {
		w.int(v)
	}
	w.bool(e.UserNS)
	w.int(e.Deadline)
	w.ints(e.CgroupFDs)
	w.bool(e.Pooled)
	w.bool(e.StdinNull)
	w.int(int64(e.HostUmask))
	w.len(e.HostRlimits == nil, len(e.HostRlimits))
	for _, r := range e.HostRlimits {
		w.int(int64(r.Resource))
		w.uint(r.Cur)
		w.uint(r.Max)
	}
	w.len(e.Files == nil, len(e.Files))
	for _, f := range e.Files {
		w.uint(f.Dev)
		w.uint(f.Ino)
	}
	return w.b
}

// decodeEnvelope reads an envelope encodeEnvelope wrote. A plan of another protocol is an error
// naming it (a JSON plan, protocol 6 and older, starts with '{'), as is any byte left over.
func decodeEnvelope(data []byte) (envelope, error) {
	var e envelope
	if len(data) > 0 && data[0] == '{' {
		return e, errors.New("the plan is JSON (protocol 6 or older), this sandbox executable speaks " +
			fmt.Sprint(planProtocol) + ": install clihost-sandbox from the same build as clihostd")
	}
	r := wireReader{b: data}
	if e.Protocol = int(r.int()); r.err == nil && e.Protocol != planProtocol {
		return e, fmt.Errorf("the plan is protocol %d, this sandbox executable speaks %d: install clihost-sandbox from the same build as clihostd", e.Protocol, planProtocol)
	}
	p := &e.Plan
	p.Path = r.str()
	p.Args = r.strs()
	p.Dir = r.str()
	p.Env = r.strs()
	p.UID = int(r.int())
	p.GID = int(r.int())
	p.Groups = r.ints()
	p.Umask = int(r.int())
	for _, l := range []*[]string{&p.ReadOnly, &p.ReadWrite, &p.Exec, &p.Protect, &p.Absent, &p.Deny} {
		*l = r.strs()
	}
	p.NoNetwork = r.bool()
	p.Egress = r.bool()
	p.Ingress = r.ints()
	p.NetworkKey = r.str()
	p.Seccomp = r.bool()
	p.Timeout = time.Duration(r.int())
	p.NoExecMemfd = r.bool()
	l := &p.Limits
	l.MemoryBytes, l.Pids, l.CPU = r.int(), r.int(), time.Duration(r.int())
	l.NoFile, l.FileSize, l.TmpfsBytes = r.int(), r.int(), r.int()
	e.UserNS = r.bool()
	e.Deadline = r.int()
	e.CgroupFDs = r.ints()
	e.Pooled = r.bool()
	e.StdinNull = r.bool()
	e.HostUmask = int(r.int())
	if n, isNil := r.len(3); !isNil {
		e.HostRlimits = make([]rlimit, n)
		for i := range e.HostRlimits {
			e.HostRlimits[i] = rlimit{Resource: int(r.int()), Cur: r.uint(), Max: r.uint()}
		}
	}
	if n, isNil := r.len(2); !isNil {
		e.Files = make([]fileID, n)
		for i := range e.Files {
			e.Files[i] = fileID{Dev: r.uint(), Ino: r.uint()}
		}
	}
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%w: %d bytes after its end", errPlanWire, len(r.b))
	}
	if r.err != nil {
		return envelope{}, r.err
	}
	return e, nil
}

// wireWriter appends values in the plan's wire format.
type wireWriter struct{ b []byte }

func (w *wireWriter) int(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *wireWriter) uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

func (w *wireWriter) bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

// len writes a list's length: 0 for a nil list, else its length plus one.
func (w *wireWriter) len(isNil bool, n int) {
	if isNil {
		w.uint(0)
	} else {
		w.uint(uint64(n) + 1)
	}
}

func (w *wireWriter) str(s string) {
	w.uint(uint64(len(s)))
	w.b = append(w.b, s...)
}

func (w *wireWriter) strs(l []string) {
	w.len(l == nil, len(l))
	for _, s := range l {
		w.str(s)
	}
}

func (w *wireWriter) ints(l []int) {
	w.len(l == nil, len(l))
	for _, v := range l {
		w.int(int64(v))
	}
}

// wireReader reads values in the plan's wire format. Its first failure is kept in err; every
// read after it returns a zero value.
type wireReader struct {
	b   []byte
	err error
}

func (r *wireReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errPlanWire, what)
	}
	r.b = nil
}

func (r *wireReader) int() int64   { return next(r, binary.Varint, "bad integer") }
func (r *wireReader) uint() uint64 { return next(r, binary.Uvarint, "bad unsigned integer") }

// next reads one varint of r with decode (binary.Varint or binary.Uvarint).
func next[T int64 | uint64](r *wireReader, decode func([]byte) (T, int), what string) T {
	v, n := decode(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *wireReader) bool() bool {
	if len(r.b) == 0 || r.b[0] > 1 {
		r.fail("bad bool")
		return false
	}
	v := r.b[0] == 1
	r.b = r.b[1:]
	return v
}

// len reads a list's length, for elements of at least min bytes each: a length the rest of the
// plan cannot hold is malformed (no allocation follows from a corrupt length).
func (r *wireReader) len(min int) (n int, isNil bool) {
	v := r.uint()
	if r.err != nil || v == 0 {
		return 0, true
	}
	if v-1 > uint64(len(r.b)/min) {
		r.fail("list longer than the plan")
		return 0, true
	}
	return int(v - 1), false
}

func (r *wireReader) str() string {
	n := r.uint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.fail("string longer than the plan")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *wireReader) strs() []string { return list(r, r.str) }
func (r *wireReader) ints() []int    { return list(r, func() int { return int(r.int()) }) }

// list reads a list of r whose elements elem reads (each at least one byte long).
func list[T any](r *wireReader, elem func() T) []T {
	n, isNil := r.len(1)
	if isNil {
		return nil
	}
	l := make([]T, n)
	for i := range l {
		l[i] = elem()
	}
	return l
}
