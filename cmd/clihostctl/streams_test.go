package main

import (
	"bytes"
	"strings"
)

// testStreams is an IOStreams over buffers, stdin holding in; no stream is a terminal until the
// test says so (SetTTY).
func testStreams(in string) (ios *IOStreams, stdout, stderr *bytes.Buffer) {
	stdout, stderr = new(bytes.Buffer), new(bytes.Buffer)
	return &IOStreams{In: strings.NewReader(in), Out: stdout, ErrOut: stderr}, stdout, stderr
}
