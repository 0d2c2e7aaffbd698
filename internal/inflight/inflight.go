// Package inflight bounds the calls a daemon runs at once: in total and for each caller (a control
// socket's user, an MCP agent's token), so that one caller cannot take every thread, process and
// sandbox of a host that others share. A call holds its slot until it has returned and, beyond
// that, until every sandbox it let go of without its end (a process blocked in the kernel on a
// file system that does not answer: nsinit.Cmd.Abandon) has ended: such a sandbox still holds a
// thread, a PID namespace and a control group, and its caller could otherwise pile them up one
// timed-out call after another.
package inflight

import (
	"context"
	"fmt"
	"sync"
)

// Limiter counts the calls in flight, in total and by caller. The zero limits are "no bound". It is
// safe for concurrent use; a nil *Limiter admits every call.
type Limiter struct {
	total, perCaller int

	mu       sync.Mutex
	n        int
	byCaller map[string]int
	refused  [2]uint64 // by Refusal.PerCaller: [total, per caller]
}

// New returns a Limiter of at most total calls at once, at most perCaller of them for one caller
// (0: no bound).
func New(total, perCaller int) *Limiter {
	return &Limiter{total: total, perCaller: perCaller, byCaller: map[string]int{}}
}

// Refusal is why Acquire refused a call: a bound reached.
type Refusal struct {
	PerCaller bool // the caller's bound (else the total)
	Limit     int  // the bound
}

func (r *Refusal) Error() string {
	if r.PerCaller {
		return fmt.Sprintf("%d calls of this caller are in flight, the most one caller may have", r.Limit)
	}
	return fmt.Sprintf("%d calls are in flight, the most this host runs at once", r.Limit)
}

// Acquire takes a slot for a call of caller, or returns the Refusal of a bound reached. It never
// waits.
func (l *Limiter) Acquire(caller string) (*Slot, error) {
	if l == nil {
		return nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.perCaller > 0 && l.byCaller[caller] >= l.perCaller:
		l.refused[1]++
		return nil, &Refusal{PerCaller: true, Limit: l.perCaller}
	case l.total > 0 && l.n >= l.total:
		l.refused[0]++
		return nil, &Refusal{Limit: l.total}
	}
	l.n++
	l.byCaller[caller]++
	return &Slot{l: l, caller: caller}, nil
}

// Stats is what a Limiter counted.
type Stats struct {
	InFlight         int    // the slots taken
	Callers          int    // the callers holding at least one
	RefusedTotal     uint64 // calls refused at the total bound
	RefusedPerCaller uint64 // calls refused at a caller's bound
	Total, PerCaller int    // the bounds (0: none)
}

// Stats returns the limiter's counts now.
func (l *Limiter) Stats() Stats {
	if l == nil {
		return Stats{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{InFlight: l.n, Callers: len(l.byCaller), RefusedTotal: l.refused[0], RefusedPerCaller: l.refused[1],
		Total: l.total, PerCaller: l.perCaller}
}

// Slot is one call's place in a Limiter. A nil *Slot (a nil Limiter's) does nothing.
type Slot struct {
	l      *Limiter
	caller string

	mu       sync.Mutex
	holds    int  // Hold's channels not closed yet
	released bool // Release was called
	freed    bool // the slot went back to the limiter
}

// Hold keeps the slot taken after Release until done is closed: done is a sandbox's end that the
// call let go of without waiting for it.
func (s *Slot) Hold(done <-chan struct{}) {
	if s == nil || done == nil {
		return
	}
	s.mu.Lock()
	if s.freed {
		s.mu.Unlock()
		return
	}
	s.holds++
	s.mu.Unlock()
	go func() {
		<-done
		s.mu.Lock()
		s.holds--
		s.mu.Unlock()
		s.free()
	}()
}

// Release ends the call's use of the slot: it goes back to the limiter at once, or once every
// channel given to Hold is closed. It may be called more than once.
func (s *Slot) Release() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.released = true
	s.mu.Unlock()
	s.free()
}

// free gives the slot back once it is released and held by nothing.
func (s *Slot) free() {
	s.mu.Lock()
	if !s.released || s.holds > 0 || s.freed {
		s.mu.Unlock()
		return
	}
	s.freed = true
	s.mu.Unlock()
	l := s.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n--
	if l.byCaller[s.caller]--; l.byCaller[s.caller] <= 0 {
		delete(l.byCaller, s.caller)
	}
}

type slotKey struct{}

// WithSlot returns ctx carrying s, for Hold.
func WithSlot(ctx context.Context, s *Slot) context.Context {
	if s == nil {
		return ctx
	}
	return context.WithValue(ctx, slotKey{}, s)
}

// Held reports whether ctx carries a slot (WithSlot): the work it is for has its place already.
func Held(ctx context.Context) bool {
	s, _ := ctx.Value(slotKey{}).(*Slot)
	return s != nil
}

// Hold keeps the slot ctx carries (WithSlot), if any, taken until done is closed (see Slot.Hold).
func Hold(ctx context.Context, done <-chan struct{}) {
	s, _ := ctx.Value(slotKey{}).(*Slot)
	s.Hold(done)
}
