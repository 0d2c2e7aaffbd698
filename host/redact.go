package host

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// redactor replaces secret values (four characters or longer) in what a call returns: each value
// as it is and in the forms a CLI commonly prints it in (with a terminal's "\r\n" line endings;
// JSON-escaped inside a string, with or without HTML escapes; URL-escaped; base64, standard or URL-safe, at any of the three
// alignments it can take inside a longer encoded text such as "user:token"), in strings, object
// keys and numbers. It is not a barrier against a CLI that transforms a value on purpose (split
// across lines, reversed, hex): what reaches the CLI's environment is the CLI's to keep.
type redactor []string

const redacted = "[REDACTED]"

// minRedacted is the shortest value, and the shortest part of a value at a cut, redacted: a
// shorter one would replace ordinary text everywhere.
const minRedacted = 4

// minBase64 is the shortest base64 form redacted: one of eight characters matches random base64
// text once in 2^48 positions.
const minBase64 = 8

// newRedactor is the redactor of values, longest forms first (so a value inside another is
// not replaced first, leaving the rest of the longer one).
func newRedactor(values []string) redactor {
	var r redactor
	for _, v := range values {
		if len(v) >= minRedacted {
			r = append(r, forms(v)...)
		}
	}
	slices.SortStableFunc(r, func(a, b string) int { return len(b) - len(a) })
	return r
}

// forms are the texts a value v is redacted in.
func forms(v string) []string {
	out := []string{v}
	add := func(f string) {
		if len(f) >= minRedacted && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	if strings.Contains(v, "\n") { // as a terminal prints it (a tool with tty.required)
		add(strings.ReplaceAll(strings.ReplaceAll(v, "\r\n", "\n"), "\n", "\r\n"))
	}
	q, _ := json.Marshal(v)
	add(strings.Trim(string(q), `"`))
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	add(strings.Trim(strings.TrimSpace(b.String()), `"`))
	add(url.QueryEscape(v))
	add(url.PathEscape(v))
	for _, e := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for k := range 3 {
			// Shorter, a form would also match ordinary base64 text (a file's content) now and then.
			if f := base64Aligned(e, v, k); len(f) >= minBase64 {
				add(f)
			}
		}
	}
	return out
}

// base64Aligned is the part of the encoding of v, preceded by k other bytes, that depends on v's
// bytes alone: the characters whose six bits all come from v.
func base64Aligned(e *base64.Encoding, v string, k int) string {
	enc := e.EncodeToString(append(make([]byte, k), v...))
	start := (8*k + 5) / 6
	end := 8 * (k + len(v)) / 6
	if end <= start {
		return ""
	}
	return enc[start:end]
}

func (r redactor) text(s string) string {
	for _, v := range r {
		s = strings.ReplaceAll(s, v, redacted)
	}
	return s
}

// cutTail redacts the start of a value (at least minRedacted characters) that a cut (a capture
// limit) left at the end of s.
func (r redactor) cutTail(s string) string {
	for _, v := range r {
		for n := len(v) - 1; n >= minRedacted; n-- {
			if strings.HasSuffix(s, v[:n]) {
				return s[:len(s)-n] + redacted
			}
		}
	}
	return s
}

// cutHead redacts the end of a value (at least minRedacted characters) that a cut left at the
// start of s, an excerpt that begins with "…".
func (r redactor) cutHead(s string) string {
	rest, cut := strings.CutPrefix(s, "…")
	if !cut {
		return s
	}
	for _, v := range r {
		for n := len(v) - 1; n >= minRedacted; n-- {
			if strings.HasPrefix(rest, v[len(v)-n:]) {
				return "…" + redacted + rest[n:]
			}
		}
	}
	return s
}

// value redacts a decoded result in place: strings, object keys and numbers (a numeric secret
// printed as a JSON or YAML number becomes the string "[REDACTED]").
func (r redactor) value(v any) any {
	if len(r) == 0 {
		return v
	}
	switch t := v.(type) {
	case string:
		return r.text(t)
	case json.Number, int, int64, uint64, float64:
		s := fmt.Sprint(t)
		if f, ok := t.(float64); ok {
			s = strconv.FormatFloat(f, 'f', -1, 64)
		}
		if r.text(s) != s {
			return r.text(s)
		}
	case map[string]any:
		for _, k := range slices.Collect(maps.Keys(t)) {
			x := r.value(t[k])
			if rk := r.text(k); rk != k {
				delete(t, k)
				k = freeKey(t, rk)
			}
			t[k] = x
		}
	case []any:
		for i, x := range t {
			t[i] = r.value(x)
		}
	}
	return v
}

// freeKey is k, or k with a number appended when m already has it (two keys redacted alike).
func freeKey(m map[string]any, k string) string {
	out := k
	for i := 2; ; i++ {
		if _, taken := m[out]; !taken {
			return out
		}
		out = fmt.Sprintf("%s (%d)", k, i)
	}
}
