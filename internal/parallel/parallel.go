// Package parallel runs independent pieces of work on a few goroutines.
package parallel

import (
	"runtime"
	"sync"
)

// Each calls f once on every item, on at most GOMAXPROCS long-lived goroutines (never more than
// there are items), and returns when every call has. The calls share nothing through Each: f must
// only touch its own item, or synchronise.
func Each[T any](items []T, f func(T)) {
	work := make(chan T)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(items)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for item := range work {
				f(item)
			}
		}()
	}
	for _, item := range items {
		work <- item
	}
	close(work)
	wg.Wait()
}
