package acli

import (
	"strings"
	"testing"
)

// BenchmarkParse measures tokenize + route + option parsing of a realistic command against the
// shipped gh bundle (budget: 20 µs per command).
func BenchmarkParse(b *testing.B) {
	gh := shipped(b, "gh")
	const cmd = "pr list --state open --limit 10 --label bug,ui"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(gh, cmd, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseQuoted adds quoting, positionals and a boolean.
func BenchmarkParseQuoted(b *testing.B) {
	gh := shipped(b, "gh")
	const cmd = `issue create "Crash on start" 'Steps: run it; see \"boom\"' --label bug --assignee @me --repo cli/cli`
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(gh, cmd, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTokenizeMax tokenizes a command near both limits: 100 quoted arguments with escapes,
// 9,800 characters in all.
func BenchmarkTokenizeMax(b *testing.B) {
	cmd := strings.Repeat(`"ab\"c`+strings.Repeat("x", 90)+`" `, MaxArgs)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Tokenize(cmd); err != nil {
			b.Fatal(err)
		}
	}
}
