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
