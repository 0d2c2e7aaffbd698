package acli

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/clihost/clihost/manifest"
)

// FuzzParse checks that Tokenize and Parse never panic, that tokens respect the limits and never
// hold a NUL, and that every successful parse leads to a usable request.
func FuzzParse(f *testing.F) {
	gh := shipped(f, "gh")
	b := kit(f)
	ws, _ := workspace(f)
	for _, seed := range []string{
		"", "help", "help pr list", "schema issue", "version", "pr list --state open --limit 10 --label bug,ui",
		`issue create "Crash" 'it'\''s' --label bug`, "pr list --help", "pr --help", "pr", "gh pr list",
		"run -vfn3 --tags a,b --ids 1,2 --meta '{\"a\":[1]}' --since 2026-02-02T10:00:00Z --no-verbose",
		"files copy ../x link-out/y --also a -- --b", "files cat -h a b c", "grp sub deep -1 x y z",
		"a\x00b", "\xff", `"unclosed`, "'unclosed", `trailing\`, "x\\\ny", `"a\nb\$c"`, "🚀 日本 مرحبا",
		"calendar events; rm -rf / | cat $(id) `id` > /etc/passwd",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, command string) {
		toks, err := Tokenize(command)
		if err != nil {
			if err.Code != ParseError || err.Message == "" {
				t.Fatalf("tokenize error %+v", err)
			}
		} else {
			if len(toks) > MaxArgs {
				t.Fatalf("%d tokens", len(toks))
			}
			for _, tok := range toks {
				if strings.IndexByte(tok, 0) >= 0 || !utf8.ValidString(tok) || utf8.RuneCountInString(tok) > MaxArgLength {
					t.Fatalf("bad token %q", tok)
				}
			}
		}
		for _, target := range []struct {
			b    *manifest.Bundle
			opts Options
		}{{gh, Options{}}, {b, Options{Workspace: ws}}} {
			req, perr := Parse(target.b, command, target.opts)
			if err != nil && perr == nil {
				t.Fatalf("Parse accepted what Tokenize refused: %q", command)
			}
			if perr != nil {
				if perr.Code == "" || perr.Message == "" || len(perr.Examples) > 3 && perr.Code == CommandNotFound {
					t.Fatalf("error %+v", perr)
				}
				if _, jerr := json.Marshal(Failure(command, perr)); jerr != nil {
					t.Fatal(jerr)
				}
				continue
			}
			switch req.Kind {
			case KindCall:
				if req.Tool == nil || req.Tool.Tool == nil || req.Input == nil || req.Command != req.Tool.CommandPath() {
					t.Fatalf("call %+v", req)
				}
				if _, jerr := json.Marshal(req.Input); jerr != nil {
					t.Fatalf("input %#v: %v", req.Input, jerr)
				}
			case KindHelp:
				h, herr := Help(target.b, req.Topic)
				if herr != nil {
					t.Fatalf("help %q: %v", req.Topic, herr)
				}
				if _, jerr := json.Marshal(Success(command, h, "", 0)); jerr != nil {
					t.Fatal(jerr)
				}
			case KindSchema:
				if _, serr := Schema(target.b, req.Topic); serr != nil {
					t.Fatalf("schema %q: %v", req.Topic, serr)
				}
			case KindVersion:
			default:
				t.Fatalf("kind %d", req.Kind)
			}
		}
	})
}
