package manifest

import (
	"strings"

	"github.com/clihost/clihost/internal/editdist"
)

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
		// Names longer than 64 bytes are not typos of short keywords (and cost no distance).
		if c == name || len(c)-len(name) > limit || len(name)-len(c) > limit || len(name) > 64 || len(c) > 64 {
			continue
		}
		d := editdist.Distance(lower, strings.ToLower(c))
		if d <= limit && (bestD < 0 || d < bestD) {
			best, bestD = c, d
		}
	}
	return best
}

// didYouMean renders a suggestion for a message, or "" when there is none.
func didYouMean(s string) string {
	if s == "" {
		return ""
	}
	return "; did you mean '" + s + "'?"
}
