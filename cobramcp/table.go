package cobramcp

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// ParseTable reads a table printed as a header line and rows aligned on whitespace (kubectl get,
// docker ps, ps, text/tabwriter) into one object per row, keyed by the header's column names
// lower-cased with runs of other characters than letters and digits as _ ("CONTAINER ID" →
// container_id). Empty lines are skipped; a cell that is blank is "". Lines holding tabs are split
// on runs of tabs. Otherwise a column is a run of character positions that are not blank in
// every line, so left- and right-aligned columns both work, a header of several words over one
// column ("CONTAINER ID") is one name, and a part of a cell with no header word above it (the
// "ago" of "2 hours ago" past its header's end) belongs to the column on its left.
func ParseTable(out string) []map[string]any {
	var lines [][]rune
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, []rune(strings.TrimRight(l, " \r")))
		}
	}
	rows := []map[string]any{}
	if len(lines) == 0 {
		return rows
	}
	if strings.ContainsRune(string(lines[0]), '\t') {
		return tabTable(lines)
	}
	cols := columns(lines)
	for _, l := range lines[1:] {
		row := make(map[string]any, len(cols))
		for _, c := range cols {
			row[c.name] = strings.TrimSpace(string(slice(l, c.start, c.end)))
		}
		rows = append(rows, row)
	}
	return rows
}

// column is one column: its key and its character positions [start, end).
type column struct {
	name       string
	start, end int
}

// columns finds the columns: runs of positions not blank in some line, each named by the header
// words over it; a run with no header word joins the column on its left (or the first column on
// its right).
func columns(lines [][]rune) []column {
	width := 0
	for _, l := range lines {
		width = max(width, len(l))
	}
	used := make([]bool, width)
	for _, l := range lines {
		for i, r := range l {
			if !unicode.IsSpace(r) {
				used[i] = true
			}
		}
	}
	var cols []column
	pending := -1 // the start of header-less runs before the first named column
	for i := 0; i < width; {
		if !used[i] {
			i++
			continue
		}
		j := i
		for j < width && used[j] {
			j++
		}
		name := strings.Join(strings.Fields(string(slice(lines[0], i, j))), " ")
		switch {
		case name != "":
			start := i
			if pending >= 0 {
				start, pending = pending, -1
			}
			cols = append(cols, column{name: key(name), start: start, end: j})
		case len(cols) > 0:
			cols[len(cols)-1].end = j
		case pending < 0:
			pending = i
		}
		i = j
	}
	dedupe(cols)
	return cols
}

// tabTable splits every line on runs of tabs.
func tabTable(lines [][]rune) []map[string]any {
	split := func(l []rune) []string { return tabs.Split(string(l), -1) }
	header := split(lines[0])
	cols := make([]column, len(header))
	for i, h := range header {
		cols[i].name = key(strings.TrimSpace(h))
	}
	dedupe(cols)
	rows := []map[string]any{}
	for _, l := range lines[1:] {
		cells := split(l)
		row := make(map[string]any, len(cols))
		for i, c := range cols {
			row[c.name] = ""
			if i < len(cells) {
				row[c.name] = strings.TrimSpace(cells[i])
			}
		}
		if len(cells) > len(cols) && len(cols) > 0 { // cells past the header join the last column
			last := cols[len(cols)-1].name
			row[last] = strings.TrimSpace(strings.Join(cells[len(cols)-1:], "\t"))
		}
		rows = append(rows, row)
	}
	return rows
}

var (
	tabs    = regexp.MustCompile(`\t+`)
	nonWord = regexp.MustCompile(`[^\p{L}\p{N}]+`)
)

// key is a column name as an object key: lower case, other characters than letters and digits
// as _ ("CONTAINER ID" → container_id, "%CPU" → cpu); "column" when nothing is left.
func key(name string) string {
	k := strings.Trim(nonWord.ReplaceAllString(strings.ToLower(name), "_"), "_")
	if k == "" {
		return "column"
	}
	return k
}

// dedupe suffixes repeated names: name, name_2, name_3.
func dedupe(cols []column) {
	seen := map[string]int{}
	for i := range cols {
		n := cols[i].name
		seen[n]++
		if seen[n] > 1 {
			cols[i].name = n + "_" + strconv.Itoa(seen[n])
		}
	}
}

// slice is l[start:end] clipped to l.
func slice(l []rune, start, end int) []rune {
	start, end = min(start, len(l)), min(end, len(l))
	return l[start:end]
}
