package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// palette colours text with ANSI SGR sequences when the output may carry colour
// (IOStreams.ColorEnabled: a terminal, NO_COLOR unset, --color not never), else leaves it plain.
type palette struct{ on bool }

// newPalette is the palette for ios's stdout.
func newPalette(ios *IOStreams) palette { return palette{on: ios.ColorEnabled()} }

func (p palette) wrap(code, s string) string {
	if !p.on || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func (p palette) red(s string) string   { return p.wrap("31", s) }
func (p palette) green(s string) string { return p.wrap("32", s) }
func (p palette) bold(s string) string  { return p.wrap("1", s) }
func (p palette) dim(s string) string   { return p.wrap("2", s) }

// colorMode is --color's value.
type colorMode string

const (
	colorAuto   colorMode = "" // on a terminal without NO_COLOR
	colorAlways colorMode = "always"
	colorNever  colorMode = "never"
)

// String is the flag's value as given.
func (m *colorMode) String() string {
	if *m == colorAuto {
		return "auto"
	}
	return string(*m)
}

// Set accepts auto, always or never.
func (m *colorMode) Set(v string) error {
	switch v {
	case "auto":
		*m = colorAuto
	case string(colorAlways), string(colorNever):
		*m = colorMode(v)
	default:
		return fmt.Errorf("want auto, always or never")
	}
	return nil
}

// Type names the flag's value in help.
func (m *colorMode) Type() string { return "when" }

// addColorFlag gives root --color, deciding ColorEnabled for every command.
func addColorFlag(root *cobra.Command, ios *IOStreams) {
	root.PersistentFlags().Var(&ios.color, "color", "colour the output: auto (on a terminal, unless NO_COLOR is set), always or never")
}

// ready is a READY column's value: true in green, false in red (the last column of a table, so
// the escapes do not shift tabwriter's alignment).
func (p palette) ready(ok bool) string {
	if ok {
		return p.green("true")
	}
	return p.red("false")
}
