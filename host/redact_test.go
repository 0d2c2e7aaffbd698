package host

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// TestRedactorBase64AnyAlignment: a value base64-encoded after any number of other bytes (a
// Basic authorization header's "user:token") is redacted, in both alphabets.
func TestRedactorBase64AnyAlignment(t *testing.T) {
	const v = "s3cret-t0ken?>~value"
	r := newRedactor([]string{v})
	for k := range 7 {
		for _, e := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			text := e.EncodeToString([]byte(strings.Repeat("u", k) + ":" + v + "@host"))
			if out := r.text(text); !strings.Contains(out, redacted) {
				t.Errorf("prefix of %d bytes: %s not redacted", k+1, text)
			}
		}
	}
}

// TestRedactorValue: keys, numbers and strings of a decoded result are redacted; two keys redacted
// alike both stay.
func TestRedactorValue(t *testing.T) {
	r := newRedactor([]string{"9876543210", `a"b<c>&d`, "tok-ab"})
	var v any
	if err := json.Unmarshal([]byte(`{"a\"b<c>&d": 1, "tok-ab": 2, "n": 9876543210, "s": ["x\"a\\\"b<c>&d\""], "u": "q=a%22b%3Cc%3E%26d"}`), &v); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(`{"n": 9876543210}`))
	dec.UseNumber()
	var num any
	if err := dec.Decode(&num); err != nil {
		t.Fatal(err)
	}
	for _, x := range []any{v, num} {
		out, _ := json.Marshal(r.value(x))
		for _, leak := range []string{"9876543210", "b<c", `b\u003cc`, "tok-ab", "%3Cc"} {
			if strings.Contains(string(out), leak) {
				t.Errorf("%s is in %s", leak, out)
			}
		}
	}
	if m := v.(map[string]any); len(m) != 5 {
		t.Errorf("keys redacted alike must both stay: %v", m)
	}
}

// TestRedactorCuts: a value's start left at the end of a cut text, and its end left at the start
// of an excerpt, are redacted when at least four characters long.
func TestRedactorCuts(t *testing.T) {
	r := newRedactor([]string{"abcdefgh"})
	for in, want := range map[string]string{"xx abcdef": "xx " + redacted, "xx abc": "xx abc", "…efgh yy": "…" + redacted + " yy", "…fgh yy": "…fgh yy", "efgh yy": "efgh yy"} {
		got := r.cutTail(in)
		if strings.HasPrefix(in, "…") || in == "efgh yy" {
			got = r.cutHead(in)
		}
		if got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// TestRedactorTerminalLineEndings: a multi-line value printed through a terminal (a tool with
// tty.required) comes back with "\r\n" line endings and is redacted all the same.
func TestRedactorTerminalLineEndings(t *testing.T) {
	const key = "-----BEGIN KEY-----\nMIIEvQIBADANBgkq\n-----END KEY-----"
	out := newRedactor([]string{key}).text("key:\r\n" + strings.ReplaceAll(key, "\n", "\r\n") + "\r\n")
	if strings.Contains(out, "MIIEvQIBADANBgkq") {
		t.Fatalf("not redacted: %q", out)
	}
}
