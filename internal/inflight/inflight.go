// Package inflight bounds the calls a daemon runs at once: in total and for each caller (a control
// socket's user, an MCP agent's token), so that one caller cannot take every thread, process and
// sandbox of a host that others share. A call holds its slot until it has returned and, beyond
// that, until every sandbox it let go of without its end (a process blocked in the kernel on a
// file system that does not answer: nsinit.Cmd.Abandon) has ended: such a sandbox still holds a
// thread, a PID namespace and a control group, and its caller could otherwise pile them up one
// timed-out call after another.
//
// A call its caller no longer waits for (the client went away, or the call returned with such a
// sandbox left) is abandoned: it still counts against its caller's bound, but no longer against
// the total, which bounds the calls callers wait for; abandoned calls have a bound of their own,
// AbandonedFactor times the larger of the total and the per-caller bound, so that many callers
// must fill it. A caller whose requests hang in the kernel for good so locks out only itself.
// Without a per-caller bound nothing is abandoned: the total then bounds every call, as it must
// bound each caller's.
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

	mu        sync.Mutex
	n         int            // the slots of calls their callers wait for
	abandoned int            // the slots of abandoned calls (Slot.Abandon)
	byCaller  map[string]int // every slot, by caller
	refused   [3]uint64      // by Refusal.Bound
}

// AbandonedFactor times the larger of the total and the per-caller bound is the bound on abandoned
// calls (see the package comment).
const AbandonedFactor = 16

// abandonedBound is the bound on abandoned calls (0: none).
func (l *Limiter) abandonedBound() int {
	if l.total == 0 {
		return 0
	}
	return AbandonedFactor * max(l.total, l.perCaller)
}

// New returns a Limiter of at most total calls at once, at most perCaller of them for one caller
// (0: no bound).
func New(total, perCaller int) *Limiter {
	return &Limiter{total: total, perCaller: perCaller, byCaller: map[string]int{}}
}

// Bound names one of a Limiter's bounds.
type Bound int

const (
	// Total is the bound on the calls of every caller that their callers wait for.
	Total Bound = iota
	// PerCaller is the bound on one caller's calls, abandoned ones included.
	PerCaller
	// Abandoned is the bound on abandoned calls (AbandonedFactor times the larger of Total and
	// PerCaller).
	Abandoned
)

// Refusal is why Acquire refused a call: a bound reached.
type Refusal struct {
	Bound Bound
	Limit int // the bound's value
}

func (r *Refusal) Error() string {
	switch r.Bound {
	case PerCaller:
		return fmt.Sprintf("%d calls of this caller are in flight, the most one caller may have", r.Limit)
	case Abandoned:
		return fmt.Sprintf("%d calls their callers gave up on still hold their sandboxes or threads, the most this host keeps", r.Limit)
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
	var r *Refusal
	switch {
	case l.perCaller > 0 && l.byCaller[caller] >= l.perCaller:
		r = &Refusal{Bound: PerCaller, Limit: l.perCaller}
	case l.total > 0 && l.n >= l.total:
		r = &Refusal{Bound: Total, Limit: l.total}
	case l.total > 0 && l.abandoned >= l.abandonedBound():
		r = &Refusal{Bound: Abandoned, Limit: l.abandonedBound()}
	}
	if r != nil {
		l.refused[r.Bound]++
		return nil, r
	}
	l.n++
	l.byCaller[caller]++
	return &Slot{l: l, caller: caller}, nil
}

// Stats is what a Limiter counted.
type Stats struct {
	InFlight         int       // the slots taken, abandoned ones included
	Abandoned        int       // the slots of abandoned calls
	Callers          int       // the callers holding at least one
	Refused          [3]uint64 // the calls refused, by Bound
	Total, PerCaller int       // the bounds (0: none)
}

// Stats returns the limiter's counts now.
func (l *Limiter) Stats() Stats {
	if l == nil {
		return Stats{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{InFlight: l.n + l.abandoned, Abandoned: l.abandoned, Callers: len(l.byCaller), Refused: l.refused,
		Total: l.total, PerCaller: l.perCaller}
}

// Slot is one call's place in a Limiter. A nil *Slot (a nil Limiter's) does nothing.
type Slot struct {
	l      *Limiter
	caller string

	// mu is taken before the limiter's.
	mu        sync.Mutex
	holds     int  // Hold's channels not closed yet
	released  bool // Release was called
	abandoned bool // Abandon was called, or Release with a hold left
	freed     bool // the slot went back to the limiter
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
// channel given to Hold is closed (the call is abandoned meanwhile: its caller has its answer). It
// may be called more than once.
func (s *Slot) Release() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.released = true
	held := s.holds > 0
	s.mu.Unlock()
	if held {
		s.Abandon()
	}
	s.free()
}

// Abandon says the call's caller no longer waits for it: from now on it counts against its
// caller's bound and the bound on abandoned calls, not against the total. Without a per-caller
// bound it does nothing. It may be called more than once, and after the slot went back.
func (s *Slot) Abandon() {
	if s == nil || s.l.perCaller == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.abandoned || s.freed {
		return
	}
	s.abandoned = true
	s.l.mu.Lock()
	s.l.n--
	s.l.abandoned++
	s.l.mu.Unlock()
}

// free gives the slot back once it is released and held by nothing.
func (s *Slot) free() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.released || s.holds > 0 || s.freed {
		return
	}
	s.freed = true
	l := s.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.abandoned {
		l.abandoned--
	} else {
		l.n--
	}
	if l.byCaller[s.caller]--; l.byCaller[s.caller] <= 0 {
		delete(l.byCaller, s.caller)
	}
}

// AbandonWhenDone abandons the slot once ctx is done (its caller went away), unless it went
// back before; the returned function stops that (call it before Release).
func (s *Slot) AbandonWhenDone(ctx context.Context) (stop func() bool) {
	if s == nil {
		return func() bool { return false }
	}
	return context.AfterFunc(ctx, s.Abandon)
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
