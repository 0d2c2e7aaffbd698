package host

import "strings"

// redactor replaces secret values (four characters or longer) in what a call returns.
type redactor []string

const redacted = "[REDACTED]"

func (r redactor) text(s string) string {
	for _, v := range r {
		if len(v) >= 4 {
			s = strings.ReplaceAll(s, v, redacted)
		}
	}
	return s
}

// bytes is b with the secret values replaced (b itself when there are none).
func (r redactor) bytes(b []byte) []byte {
	if len(r) == 0 {
		return b
	}
	return []byte(r.text(string(b)))
}

// cutEnd is b, a stream the capture limit cut, with the secret values replaced and a start of
// one (four bytes or longer) that b ends with, the rest of which was cut off, replaced too.
func (r redactor) cutEnd(b []byte) []byte {
	s := r.text(string(b))
	for _, v := range r {
		for k := len(v) - 1; k >= 4; k-- {
			if strings.HasSuffix(s, v[:k]) {
				s = s[:len(s)-k] + redacted
				break
			}
		}
	}
	return []byte(s)
}

func (r redactor) value(v any) any {
	if len(r) == 0 {
		return v
	}
	switch t := v.(type) {
	case string:
		return r.text(t)
	case map[string]any:
		for k, x := range t {
			t[k] = r.value(x)
		}
	case []any:
		for i, x := range t {
			t[i] = r.value(x)
		}
	}
	return v
}
