package install

import (
	"bytes"
	"sync"
)

// maxOutputLine bounds one line handed to Options.OutputLine; the rest of a longer line is cut.
const maxOutputLine = 512

// lineWriter splits an installer's output into lines for Options.OutputLine (a carriage return,
// as a progress meter redraws its line, ends one too) and keeps its last 4 KiB for errors. Stdout
// and stderr share it: it is safe for concurrent use.
type lineWriter struct {
	mu      sync.Mutex
	emit    func(string)
	partial []byte
	last    tailBuffer
}

// Write hands each complete line of p on; it never fails.
func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.last.Write(p)
	for _, c := range p {
		if c == '\n' || c == '\r' {
			w.send()
			continue
		}
		if len(w.partial) < maxOutputLine {
			w.partial = append(w.partial, c)
		}
	}
	return len(p), nil
}

// flush hands on a last line without a line break.
func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.send()
}

// send hands on the line collected, unless it is blank.
func (w *lineWriter) send() {
	if line := bytes.TrimSpace(w.partial); len(line) > 0 {
		w.emit(string(line))
	}
	w.partial = w.partial[:0]
}
