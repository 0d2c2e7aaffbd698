package main

import (
	"io"
	"os"

	"golang.org/x/term"
)

// IOStreams is what a command reads and writes, and what it knows about the terminal, as gh's
// pkg/iostreams: every command gets it from globalOptions instead of using os.Stdin, os.Stdout and
// os.Stderr, so that a test runs a command in-process with buffers and says which of them are a
// terminal.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	stdinTTY, stdoutTTY, stderrTTY bool
	noColor                        bool      // NO_COLOR is set
	color                          colorMode // --color: auto (the default), always or never
}

// systemStreams is this process's stdin, stdout and stderr, with their terminal state.
func systemStreams() *IOStreams {
	_, noColor := os.LookupEnv("NO_COLOR")
	return &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		stdinTTY: isTerminal(os.Stdin), stdoutTTY: isTerminal(os.Stdout), stderrTTY: isTerminal(os.Stderr), noColor: noColor}
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// IsStdinTTY reports whether In is a terminal.
func (s *IOStreams) IsStdinTTY() bool { return s.stdinTTY }

// IsStdoutTTY reports whether Out is a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.stdoutTTY }

// IsStderrTTY reports whether ErrOut is a terminal.
func (s *IOStreams) IsStderrTTY() bool { return s.stderrTTY }

// SetTTY says whether In, Out and ErrOut are terminals (for tests).
func (s *IOStreams) SetTTY(stdin, stdout, stderr bool) {
	s.stdinTTY, s.stdoutTTY, s.stderrTTY = stdin, stdout, stderr
}

// ColorEnabled reports whether Out may carry colour: with --color always, never with --color
// never, else only on a terminal and never with NO_COLOR set (https://no-color.org).
func (s *IOStreams) ColorEnabled() bool {
	switch s.color {
	case colorAlways:
		return true
	case colorNever:
		return false
	}
	return s.stdoutTTY && !s.noColor
}

// CanPrompt reports whether the person can be asked: stdin and stderr (where questions go) are
// both terminals.
func (s *IOStreams) CanPrompt() bool { return s.stdinTTY && s.stderrTTY }
