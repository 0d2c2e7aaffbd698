package editdist

import "testing"

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"type", "type", 0},
		{"tpye", "type", 1},        // a swap counts one
		{"requird", "required", 1}, // an insertion
		{"kitten", "sitting", 3},
		{"ça", "ca", 1}, // runes, not bytes
		{"ca", "ac", 1},
		{"abc", "ca", 3}, // optimal string alignment: no edit of a swapped pair
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
