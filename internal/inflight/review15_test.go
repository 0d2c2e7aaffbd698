package inflight

// Outside review (review15) of abandoned calls: attacks on the Limiter alone.

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestReview15NoPerCallerBoundOneCallerHoldsSeventeenTimesTheTotal (DEFECT on 6ee83f4, fixed: without
// a per-caller bound nothing is abandoned). With
// --max-calls-per-caller 0 (documented: "0 lifts a bound") the total was, before abandoned calls,
// the bound on one caller's calls too. A caller now takes the total, lets its clients go (each
// call is abandoned: it leaves the total) and takes the total again, until the abandoned bound:
// one caller holds total + 16 × total places (threads, PID namespaces, control groups when its
// calls hang in the kernel), and every other caller is refused for the abandoned bound.
func TestReview15NoPerCallerBoundOneCallerHoldsSeventeenTimesTheTotal(t *testing.T) {
	const total = 2
	l := New(total, 0)
	held := 0
	for {
		s, err := l.Acquire("uid:1000")
		if err != nil {
			break
		}
		held++
		s.Abandon() // its client disconnected; the call hangs in the kernel
		if held > 100*total {
			break
		}
	}
	if held > total {
		t.Errorf("one caller holds %d places with --max-calls %d --max-calls-per-caller 0 (abandoned: %d); before abandoned calls the total bounded it at %d",
			held, total, l.Stats().Abandoned, total)
	}
	// Without a per-caller bound one caller may take the whole total, as before abandoned calls;
	// what must not happen is the abandoned bound filled by one caller.
	_, err := l.Acquire("uid:0")
	var r *Refusal
	if errors.As(err, &r) && r.Bound == Abandoned {
		t.Errorf("another caller (root) is refused (%v) once one caller's abandoned calls fill the abandoned bound: that caller locks out every other, not only itself", err)
	}
}

// TestReview15PerCallerAboveAbandonedBoundLocksOutOthers (DEFECT on 6ee83f4, fixed: the abandoned
// bound is 16 times the larger of the two bounds). --max-calls 1 with the
// default --max-calls-per-caller 16 (a small host whose operator lowered only the total): the
// abandoned bound is 16 × 1 = 16, which one caller's own bound reaches. One member whose 16
// requests hang in the kernel fills it, and every other user's call is refused — the docs say
// such a member "locks out only themself".
func TestReview15PerCallerAboveAbandonedBoundLocksOutOthers(t *testing.T) {
	l := New(1, 16)
	for i := range 16 {
		s, err := l.Acquire("uid:1000")
		if err != nil {
			t.Fatalf("the member's call %d: %v", i, err)
		}
		s.Abandon()
	}
	if _, err := l.Acquire("uid:0"); err != nil {
		t.Errorf("root's call once one member has its 16 abandoned calls (--max-calls 1, --max-calls-per-caller 16): %v; one member locks out every user", err)
	}
}

// TestReview15SlotsNeverLeakUnderRaces (held). Every order of Abandon (direct and through
// AbandonWhenDone's context ending before, during or after the call), Release (twice), Hold
// (channels closed before, during, after Release; Hold after Release) and refused Acquires,
// from many goroutines: the counts come back to 0, and never go negative meanwhile.
func TestReview15SlotsNeverLeakUnderRaces(t *testing.T) {
	l := New(8, 3)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var bad sync.Once
	watch := make(chan struct{})
	go func() {
		defer close(watch)
		for {
			select {
			case <-stop:
				return
			default:
			}
			l.mu.Lock()
			n, a := l.n, l.abandoned
			neg := false
			for _, v := range l.byCaller {
				if v < 0 {
					neg = true
				}
			}
			l.mu.Unlock()
			if n < 0 || a < 0 || neg || n > 8 {
				bad.Do(func() { t.Errorf("counts out of range: n %d abandoned %d byCaller %v", n, a, neg) })
			}
		}
	}()
	for g := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			caller := []string{"a", "b", "c", "d"}[g%4]
			for range 3000 {
				s, err := l.Acquire(caller)
				if err != nil {
					continue
				}
				ctx, cancel := context.WithCancel(context.Background())
				if rng.IntN(4) == 0 {
					cancel()
				}
				stopAbandon := s.AbandonWhenDone(ctx)
				var dones []chan struct{}
				for range rng.IntN(3) {
					d := make(chan struct{})
					dones = append(dones, d)
					s.Hold(d)
				}
				var inner sync.WaitGroup
				cancelInner := rng.IntN(2) == 0 // drawn here: rng is this goroutine's alone
				inner.Go(func() {
					if cancelInner {
						cancel()
					}
				})
				if rng.IntN(3) == 0 {
					go s.Abandon()
				}
				for i, d := range dones {
					if i%2 == 0 {
						close(d)
					}
				}
				stopAbandon()
				s.Release()
				late := make(chan struct{})
				s.Hold(late) // after Release: ignored once freed, else holds it
				for i, d := range dones {
					if i%2 == 1 {
						go close(d)
					}
				}
				go close(late)
				s.Release()
				inner.Wait()
				cancel()
				s.Abandon()
			}
		})
	}
	wg.Wait()
	// Holds close in goroutines: wait for them to come back.
	for range 1000 {
		if st := l.Stats(); st.InFlight == 0 && st.Abandoned == 0 && st.Callers == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	<-watch
	if st := l.Stats(); st.InFlight != 0 || st.Abandoned != 0 || st.Callers != 0 {
		t.Errorf("after every slot was released and every hold ended: %+v, want all 0 (a slot leaked)", st)
	}
}
