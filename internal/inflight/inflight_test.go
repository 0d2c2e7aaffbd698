package inflight

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBounds(t *testing.T) {
	l := New(3, 2)
	a1, err := l.Acquire("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire("a"); err != nil {
		t.Fatal(err)
	}
	var r *Refusal
	if _, err := l.Acquire("a"); !errors.As(err, &r) || r.Bound != PerCaller || r.Limit != 2 {
		t.Fatalf("a's third call: %v, want the caller's bound of 2", err)
	}
	if _, err := l.Acquire("b"); err != nil {
		t.Fatalf("b's first call, a holding 2 of 3: %v", err)
	}
	if _, err := l.Acquire("c"); !errors.As(err, &r) || r.Bound != Total || r.Limit != 3 {
		t.Fatalf("c's first call with 3 in flight: %v, want the total bound of 3", err)
	}
	a1.Release()
	a1.Release() // a second Release gives nothing back twice
	if s := l.Stats(); s.InFlight != 2 || s.Callers != 2 || s.Refused[PerCaller] != 1 || s.Refused[Total] != 1 {
		t.Fatalf("stats after one release: %+v", s)
	}
	if _, err := l.Acquire("c"); err != nil {
		t.Fatalf("c's call after a's release: %v", err)
	}
}

func TestHoldKeepsTheSlotPastRelease(t *testing.T) {
	l := New(0, 1)
	s, err := l.Acquire("a")
	if err != nil {
		t.Fatal(err)
	}
	gone1, gone2 := make(chan struct{}), make(chan struct{})
	ctx := WithSlot(context.Background(), s)
	Hold(ctx, gone1)
	Hold(ctx, gone2)
	Hold(ctx, nil) // no sandbox let go of: nothing held
	s.Release()
	if _, err := l.Acquire("a"); err == nil {
		t.Fatal("a's next call was admitted while its earlier call's sandboxes had not ended")
	}
	close(gone1)
	time.Sleep(10 * time.Millisecond)
	if _, err := l.Acquire("a"); err == nil {
		t.Fatal("a's next call was admitted while one of its earlier call's sandboxes had not ended")
	}
	close(gone2)
	waitFor(t, func() bool { return l.Stats().InFlight == 0 })
	if _, err := l.Acquire("a"); err != nil {
		t.Fatalf("a's next call once its sandboxes ended: %v", err)
	}
	// A channel closed before Release: the slot goes back at Release.
	s2, _ := New(0, 1).Acquire("x")
	done := make(chan struct{})
	close(done)
	s2.Hold(done)
	s2.Release()
	waitFor(t, func() bool { return s2.l.Stats().InFlight == 0 })
}

func TestNilLimiterAdmitsEverything(t *testing.T) {
	var l *Limiter
	s, err := l.Acquire("a")
	if err != nil || s != nil {
		t.Fatalf("nil limiter: %v %v", s, err)
	}
	s.Hold(make(chan struct{}))
	s.Release()
	Hold(context.Background(), make(chan struct{})) // no slot in the context
	if l.Stats() != (Stats{}) {
		t.Fatal("nil limiter has stats")
	}
}

// TestConcurrentCallersNeverPassTheBounds: many callers at once, each slot held a moment, some
// past Release: at no time are more slots taken than the bounds allow, and all come back. A slot
// released with a hold left is abandoned (its caller has its answer): from then on it counts
// against its caller's bound only, not against the total, so the test stops counting it as
// running before it calls Release.
func TestConcurrentCallersNeverPassTheBounds(t *testing.T) {
	const total, perCaller = 8, 3
	l := New(total, perCaller)
	var running atomic.Int32
	var byCaller [5]atomic.Int32
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			c := i % len(byCaller)
			s, err := l.Acquire(strconv.Itoa(c))
			if err != nil {
				return
			}
			if n := running.Add(1); n > total {
				t.Errorf("%d slots taken, bound %d", n, total)
			}
			if n := byCaller[c].Add(1); n > perCaller {
				t.Errorf("caller %d holds %d slots, bound %d", c, n, perCaller)
			}
			time.Sleep(time.Millisecond)
			running.Add(-1)
			if i%3 == 0 {
				gone := make(chan struct{})
				s.Hold(gone)
				go func() { time.Sleep(time.Millisecond); byCaller[c].Add(-1); close(gone) }()
			} else {
				byCaller[c].Add(-1)
			}
			s.Release()
		})
	}
	wg.Wait()
	waitFor(t, func() bool { return l.Stats().InFlight == 0 && l.Stats().Callers == 0 })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("condition not met within 2.5 s")
}

// TestAbandonedCallsCountAgainstTheirCallerOnly: a call whose caller went away (Abandon, or a
// Release with a sandbox still held) leaves the total to the calls callers wait for, keeps its
// caller's place until it is freed, and counts against the bound on abandoned calls.
func TestAbandonedCallsCountAgainstTheirCallerOnly(t *testing.T) {
	l := New(2, 2)
	a1, _ := l.Acquire("a")
	a2, _ := l.Acquire("a")
	var r *Refusal
	if _, err := l.Acquire("b"); !errors.As(err, &r) || r.Bound != Total {
		t.Fatalf("b's call with a's two calls waited for: %v, want the total bound", err)
	}
	a1.Abandon()
	a1.Abandon() // once only
	stuck := make(chan struct{})
	a2.Hold(stuck)
	a2.Release() // returned to its caller, its sandbox left behind
	if s := l.Stats(); s.InFlight != 2 || s.Abandoned != 2 {
		t.Fatalf("stats with a's two calls abandoned: %+v", s)
	}
	b, err := l.Acquire("b")
	if err != nil {
		t.Fatalf("b's call with a's two calls abandoned: %v", err)
	}
	if _, err := l.Acquire("a"); !errors.As(err, &r) || r.Bound != PerCaller {
		t.Fatalf("a's call with its two abandoned calls not freed: %v, want its own bound", err)
	}
	a1.Release()
	close(stuck)
	b.Release()
	waitStats(t, l, func(s Stats) bool { return s.InFlight == 0 && s.Abandoned == 0 && s.Callers == 0 })
	a1.Abandon() // after the slot went back: nothing
	if s := l.Stats(); s.InFlight != 0 || s.Abandoned != 0 {
		t.Fatalf("stats after a late Abandon: %+v", s)
	}
}

// TestAbandonedCallsHaveABoundOfTheirOwn: abandoned calls are bounded too, at AbandonedFactor
// times the total, whoever their callers are.
func TestAbandonedCallsHaveABoundOfTheirOwn(t *testing.T) {
	l := New(1, 1)
	for i := range AbandonedFactor {
		s, err := l.Acquire(strconv.Itoa(i))
		if err != nil {
			t.Fatalf("caller %d's call with %d abandoned: %v", i, i, err)
		}
		s.Abandon()
	}
	var r *Refusal
	if _, err := l.Acquire("last"); !errors.As(err, &r) || r.Bound != Abandoned || r.Limit != AbandonedFactor {
		t.Fatalf("a call with %d abandoned: %v, want the bound on abandoned calls", AbandonedFactor, err)
	}
	if s := l.Stats(); s.Refused[Abandoned] != 1 {
		t.Fatalf("stats: %+v", s)
	}
}

// TestNothingIsAbandonedWithoutAPerCallerBound: the total then bounds every call, each caller's
// included.
func TestNothingIsAbandonedWithoutAPerCallerBound(t *testing.T) {
	l := New(1, 0)
	s, _ := l.Acquire("a")
	s.Abandon()
	var r *Refusal
	if _, err := l.Acquire("a"); !errors.As(err, &r) || r.Bound != Total {
		t.Fatalf("a's second call, its first abandoned, without a per-caller bound: %v, want the total bound", err)
	}
	s.Release()
	if st := l.Stats(); st.InFlight != 0 || st.Abandoned != 0 {
		t.Fatalf("stats: %+v", st)
	}
}

// TestAbandonWhenDone: the slot is abandoned when its context ends, unless stopped first.
func TestAbandonWhenDone(t *testing.T) {
	l := New(1, 2)
	ctx, cancel := context.WithCancel(context.Background())
	s, _ := l.Acquire("a")
	s.AbandonWhenDone(ctx)
	cancel()
	waitStats(t, l, func(st Stats) bool { return st.Abandoned == 1 })
	s.Release()
	ctx2, cancel2 := context.WithCancel(context.Background())
	s2, _ := l.Acquire("a")
	stop := s2.AbandonWhenDone(ctx2)
	stop()
	cancel2()
	time.Sleep(10 * time.Millisecond)
	if st := l.Stats(); st.Abandoned != 0 || st.InFlight != 1 {
		t.Fatalf("a stopped AbandonWhenDone abandoned the slot: %+v", st)
	}
	s2.Release()
	var nilSlot *Slot
	nilSlot.AbandonWhenDone(ctx2)() // a nil Limiter's slot does nothing
	nilSlot.Abandon()
}

// waitStats waits (at most 5 s) until l's stats satisfy ok.
func waitStats(t *testing.T, l *Limiter, ok func(Stats) bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(l.Stats()); {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", l.Stats())
		}
		time.Sleep(time.Millisecond)
	}
}
