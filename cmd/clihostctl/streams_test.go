package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// testStreams is an IOStreams over buffers, stdin holding in; no stream is a terminal until the
// test says so (SetTTY).
func testStreams(in string) (ios *IOStreams, stdout, stderr *bytes.Buffer) {
	stdout, stderr = new(bytes.Buffer), new(bytes.Buffer)
	return &IOStreams{In: strings.NewReader(in), Out: stdout, ErrOut: stderr}, stdout, stderr
}

// TestColorEnabled: colour only on a terminal, and never with NO_COLOR set (even empty).
func TestColorEnabled(t *testing.T) {
	t.Setenv("NO_COLOR", "")
	s := systemStreams()
	s.SetTTY(true, true, true)
	if s.ColorEnabled() {
		t.Error("colour with NO_COLOR set")
	}
	os.Unsetenv("NO_COLOR") // restored by t.Setenv's cleanup
	s = systemStreams()
	if s.SetTTY(true, false, true); s.ColorEnabled() {
		t.Error("colour on a stdout that is not a terminal")
	}
	if s.SetTTY(false, true, false); !s.ColorEnabled() {
		t.Error("no colour on a terminal without NO_COLOR")
	}
}
