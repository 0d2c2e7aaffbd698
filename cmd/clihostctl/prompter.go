package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"golang.org/x/term"
)

// Prompter asks the person at the terminal; commands ask only when IOStreams.CanPrompt. Tests
// give commands a fake one.
type Prompter interface {
	// Confirm asks a yes/no question, "QUESTION [y/N] "; only y or yes is yes.
	Confirm(question string) (bool, error)
	// Input asks for one line, "PROMPT: ", and returns it without surrounding space.
	Input(prompt string) (string, error)
	// Password asks for a secret, "PROMPT: ", without echoing it on a terminal.
	Password(prompt string) (string, error)
}

// ioPrompter is the Prompter of an IOStreams: questions on ErrOut, answers from In.
type ioPrompter struct {
	io *IOStreams
	in *bufio.Reader
}

// newPrompter returns the Prompter that asks on ios.
func newPrompter(ios *IOStreams) Prompter {
	return &ioPrompter{io: ios, in: bufio.NewReader(ios.In)}
}

func (p *ioPrompter) Confirm(question string) (bool, error) {
	fmt.Fprintf(p.io.ErrOut, "%s [y/N] ", question)
	line, err := p.line()
	answer := strings.ToLower(line)
	return answer == "y" || answer == "yes", err
}

func (p *ioPrompter) Input(prompt string) (string, error) {
	fmt.Fprintf(p.io.ErrOut, "%s: ", prompt)
	return p.line()
}

func (p *ioPrompter) Password(prompt string) (string, error) {
	fmt.Fprintf(p.io.ErrOut, "%s: ", prompt)
	f, ok := p.io.In.(*os.File)
	if !ok || !p.io.IsStdinTTY() {
		return p.line()
	}
	b, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(p.io.ErrOut)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", prompt, err)
	}
	return string(b), nil
}

// line reads one answer; an answer without a final newline (end of input) still counts.
func (p *ioPrompter) line() (string, error) {
	line, err := p.in.ReadString('\n')
	if err != nil && line == "" {
		return "", fmt.Errorf("read answer: %w", err)
	}
	return strings.TrimSpace(line), nil
}
