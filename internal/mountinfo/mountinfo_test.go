package mountinfo

import "testing"

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`:     "/plain",
		`/w\040s`:    "/w s",
		`a\134b\011`: "a\\b\t",
		`nl\012`:     "nl\n",
		`tail\04`:    `tail\04`, // too short to be an escape
		`bad\999`:    `bad\999`, // not octal
		`\040\040`:   "  ",
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
