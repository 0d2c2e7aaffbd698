package parallel

import (
	"slices"
	"sync"
	"testing"
)

// TestEachCallsEveryItemOnce: every item is handed to f exactly once, whatever the number of items
// (none included) against the number of workers.
func TestEachCallsEveryItemOnce(t *testing.T) {
	for _, n := range []int{0, 1, 3, 100} {
		items := make([]int, n)
		for i := range items {
			items[i] = i
		}
		var mu sync.Mutex
		var seen []int
		Each(items, func(i int) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, i)
		})
		slices.Sort(seen)
		if !slices.Equal(seen, items) {
			t.Errorf("%d items: f saw %v", n, seen)
		}
	}
}
