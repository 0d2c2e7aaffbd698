package sandbox

import (
	"testing"
)

// TestR18KeyNoEmptyListCollision: the cache key joins Protect and ExtraDeny with NUL, so an
// empty list and a list holding one empty string share a key. Compile refuses the second (an
// extra deny "" is not absolute); Cache.Compile must refuse it too, never answer with the
// policy kept for the empty list.
func TestR18KeyNoEmptyListCollision(t *testing.T) {
	f := newFixture(t)
	for _, field := range []string{"ExtraDeny", "Protect"} {
		in := f.input(fsSandbox([]string{"./**"}, nil, nil))
		c := NewCache()
		cacheCheck(t, c, in, field+": nil, first call", false)
		cacheCheck(t, c, in, field+": nil, again", true)
		bad := in
		if field == "ExtraDeny" {
			bad.ExtraDeny = []string{""}
		} else {
			bad.Protect = []string{""}
		}
		if _, err := Compile(bad); err == nil {
			t.Fatalf("%s [\"\"]: Compile accepts it: the test proves nothing", field)
		}
		if p, err := c.Compile(bad); err == nil {
			t.Errorf("%s [\"\"]: the cache answered a kept policy (%d rules) where Compile fails", field, len(p.Rules))
		}
	}
}
