package manifest

import "strings"

// nearest returns the candidate closest to name by optimal-string-alignment distance (an edit,
// or a swap of two neighbouring letters, counts one), comparing without regard to case, or "" when
// none is close enough to be a likely typo: at most one edit for names of up to four letters, two
// for longer ones. Ties go to the candidate listed first.
func nearest(name string, candidates []string) string {
	best, bestD := "", -1
	limit := 1
	if len(name) > 4 {
		limit = 2
	}
	lower := strings.ToLower(name)
	for _, c := range candidates {
		if c == name || len(c)-len(name) > limit || len(name)-len(c) > limit {
			continue
		}
		d := osaDistance(lower, strings.ToLower(c))
		if d <= limit && (bestD < 0 || d < bestD) {
			best, bestD = c, d
		}
	}
	return best
}

// osaDistance is the optimal string alignment distance between a and b (bytes).
func osaDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return max(len(a), len(b)) // names that long are not typos of short keywords
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// didYouMean renders a suggestion for a message, or "" when there is none.
func didYouMean(s string) string {
	if s == "" {
		return ""
	}
	return "; did you mean '" + s + "'?"
}
