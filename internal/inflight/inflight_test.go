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
	if _, err := l.Acquire("a"); !errors.As(err, &r) || !r.PerCaller || r.Limit != 2 {
		t.Fatalf("a's third call: %v, want the caller's bound of 2", err)
	}
	if _, err := l.Acquire("b"); err != nil {
		t.Fatalf("b's first call, a holding 2 of 3: %v", err)
	}
	if _, err := l.Acquire("c"); !errors.As(err, &r) || r.PerCaller || r.Limit != 3 {
		t.Fatalf("c's first call with 3 in flight: %v, want the total bound of 3", err)
	}
	a1.Release()
	a1.Release() // a second Release gives nothing back twice
	if s := l.Stats(); s.InFlight != 2 || s.Callers != 2 || s.RefusedPerCaller != 1 || s.RefusedTotal != 1 {
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
// past Release: at no time are more slots taken than the bounds allow, and all come back.
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
			release := func() { byCaller[c].Add(-1); running.Add(-1) }
			if i%3 == 0 {
				gone := make(chan struct{})
				s.Hold(gone)
				go func() { time.Sleep(time.Millisecond); release(); close(gone) }()
			} else {
				release()
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
