package output

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// MaxErrorMessage bounds a failure's message; the whole error stream is in Failure.Stderr.
const MaxErrorMessage = 512

var (
	goPanic      = regexp.MustCompile(`^panic: `)
	goroutine    = regexp.MustCompile(`(?m)^goroutine \d+ \[`)
	rustPanic    = regexp.MustCompile(`^thread '[^']*'(?: \(\d+\))? panicked at (.*?):?$`)
	pyTraceback  = "Traceback (most recent call last):"
	pyException  = regexp.MustCompile(`^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Fault)?: \S|^[A-Za-z_][\w.]*(?:Error|Exception)$`)
	nodeFrame    = regexp.MustCompile(`^\s+at \S`)
	nodeError    = regexp.MustCompile(`^(?:[A-Z]\w*)?(?:Error|Exception)(?: \[\w+\])?: `)
	errorMarker  = regexp.MustCompile(`^(?:[\w.\-/]+: )?(?:error|fatal|Error|ERROR|FATAL|Fatal)(?:\[\w+\])?(?:[:(]| \()`)
	usageBanner  = regexp.MustCompile(`^(?i:usage)\s*:`)
	indentedLine = regexp.MustCompile(`^\s`)
)

// ErrorMessage picks the line of a failed CLI's error output that says what went wrong: a Go
// panic's "panic: …" line (not the last frame of its stack), a Rust panic's location and message,
// the exception line that ends a Python traceback (the last one of a chain), the "Error: …" line
// above a Node.js stack, else the first line that starts with an error marker (error:, fatal:,
// Error:, prog: error …), else the first non-empty line that is not a usage banner or its
// indented continuation. It returns "" for empty text.
func ErrorMessage(text string) string {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for _, pick := range []func([]string) string{goPanicLine, rustPanicLine, pythonExceptionLine, nodeErrorLine, markedLine, firstPlainLine} {
		if m := pick(lines); m != "" {
			return clip(m)
		}
	}
	return ""
}

func goPanicLine(lines []string) string {
	if !goroutine.MatchString(strings.Join(lines, "\n")) {
		return ""
	}
	for _, l := range lines {
		if goPanic.MatchString(l) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// rustPanicLine joins "thread 'main' panicked at src/main.rs:2:5:" with the message on the next
// line (Rust 1.73 and later); older releases put both on one line.
func rustPanicLine(lines []string) string {
	for i, l := range lines {
		if m := rustPanic.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			msg := strings.TrimSpace(l)
			if strings.HasSuffix(msg, ":") && i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" {
				msg += " " + strings.TrimSpace(lines[i+1])
			}
			return msg
		}
	}
	return ""
}

// pythonExceptionLine is the last unindented "Type: message" line after the last traceback header.
func pythonExceptionLine(lines []string) string {
	last := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == pyTraceback {
			last = i
		}
	}
	if last < 0 {
		return ""
	}
	for _, l := range lines[last+1:] {
		if !indentedLine.MatchString(l) && pyException.MatchString(l) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// nodeErrorLine is the "Error: …" line directly above the first stack frame ("    at …").
func nodeErrorLine(lines []string) string {
	for i, l := range lines {
		if !nodeFrame.MatchString(l) {
			continue
		}
		for j := i - 1; j >= 0; j-- {
			if nodeError.MatchString(lines[j]) {
				return strings.TrimSpace(lines[j])
			}
		}
		return ""
	}
	return ""
}

func markedLine(lines []string) string {
	for _, l := range lines {
		if errorMarker.MatchString(strings.TrimSpace(l)) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// firstPlainLine skips a usage banner and the indented or blank lines that continue it.
func firstPlainLine(lines []string) string {
	inUsage := false
	for _, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case usageBanner.MatchString(t):
			inUsage = true
		case t == "":
		case inUsage && indentedLine.MatchString(l):
		default:
			return t
		}
	}
	for _, l := range lines {
		if t := strings.TrimSpace(l); t != "" {
			return t // nothing but a usage banner: it is the message
		}
	}
	return ""
}

// clip cuts a message to MaxErrorMessage bytes on a character boundary.
func clip(s string) string {
	if len(s) <= MaxErrorMessage {
		return s
	}
	cut := s[:MaxErrorMessage]
	for !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	return cut + "…"
}
