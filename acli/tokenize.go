package acli

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tokenize splits a command into arguments (spec §4.1) without any shell semantics:
//
//   - Whitespace (unicode.IsSpace: space, tab, newline, U+3000 and the rest) separates arguments.
//   - '…' is literal: nothing inside single quotes is special, not even a backslash.
//   - "…" follows POSIX: a backslash escapes only ", \, $, a backtick and a newline (which is then
//     removed); before any other character the backslash is kept. So "a\nb" is the four
//     characters a\nb, not a newline (the reference implementation drops the backslash; the
//     spec's ABNF turns \n and \t into control characters; neither is followed).
//   - Outside quotes a backslash makes the next character literal; backslash-newline is removed.
//     A trailing backslash is a PARSE_ERROR.
//   - Quotes may join parts of one argument (a'b'"c" is abc). A pair of quotes with nothing
//     inside is an empty argument, which is kept (the reference implementation drops it).
//   - ; | & $ ( ) < > and backticks are ordinary characters: "a; rm -rf /" is four arguments.
//
// Limits: at most MaxCommandLength characters (runes) in the command and MaxArgs arguments. The
// command must be valid UTF-8 without NUL bytes. Every violation is a PARSE_ERROR naming the rule.
func Tokenize(command string) ([]string, *Error) {
	if len(command) > MaxCommandLength { // a byte count at most MaxCommandLength is within the limit
		if n := utf8.RuneCountInString(command); n > MaxCommandLength {
			return nil, parseError(fmt.Sprintf("the command is %d characters long; the limit is %d (characters are Unicode code points)", n, MaxCommandLength),
				"Send a shorter command; split the work into several commands")
		}
	}
	if !utf8.ValidString(command) {
		return nil, parseError("the command is not valid UTF-8", "Send the command as UTF-8 text")
	}
	if strings.IndexByte(command, 0) >= 0 {
		return nil, parseError("the command contains a NUL character", "Remove the NUL (U+0000) characters")
	}
	t := tokenizer{s: command, toks: make([]string, 0, 8)}
	if err := t.run(); err != nil {
		return nil, err
	}
	return t.toks, nil
}

type tokenizer struct {
	s     string
	toks  []string
	buf   []byte // the argument being built
	inTok bool   // an argument has started (it may still be empty: '')
}

func (t *tokenizer) run() *Error {
	s := t.s
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return parseError(fmt.Sprintf("unclosed single quote at character %d", t.charAt(i)),
					`Close the quote. Inside '…' nothing can be escaped: write it's as "it's" or 'it'\''s'`)
			}
			t.buf = append(t.buf, s[i+1:i+1+j]...)
			t.inTok = true
			i += j + 2
		case c == '"':
			start := i
			t.inTok = true
			i++
			closed := false
			for i < len(s) {
				c := s[i]
				if c == '"' {
					closed = true
					i++
					break
				}
				if c == '\\' && i+1 < len(s) {
					switch n := s[i+1]; n {
					case '"', '\\', '$', '`':
						t.buf = append(t.buf, n)
						i += 2
						continue
					case '\n':
						i += 2
						continue
					}
				}
				t.buf = append(t.buf, c)
				i++
			}
			if !closed {
				return parseError(fmt.Sprintf("unclosed double quote at character %d", t.charAt(start)),
					`Close the quote, or escape a literal double quote as \"`)
			}
		case c == '\\':
			if i+1 == len(s) {
				return parseError("the command ends with a backslash", `Remove it, or write a literal backslash as \\ or '\'`)
			}
			if s[i+1] == '\n' {
				i += 2
				continue
			}
			_, size := utf8.DecodeRuneInString(s[i+1:])
			t.buf = append(t.buf, s[i+1:i+1+size]...)
			t.inTok = true
			i += 1 + size
		case c < utf8.RuneSelf:
			if asciiSpace[c] {
				if err := t.flush(); err != nil {
					return err
				}
			} else {
				t.buf = append(t.buf, c)
				t.inTok = true
			}
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if unicode.IsSpace(r) {
				if err := t.flush(); err != nil {
					return err
				}
			} else {
				t.buf = append(t.buf, s[i:i+size]...)
				t.inTok = true
			}
			i += size
		}
	}
	return t.flush()
}

// flush ends the current argument, if one has started.
func (t *tokenizer) flush() *Error {
	if !t.inTok {
		return nil
	}
	if len(t.toks) == MaxArgs {
		return parseError(fmt.Sprintf("the command has more than %d arguments", MaxArgs), "Split the work into several commands")
	}
	t.toks = append(t.toks, string(t.buf))
	t.buf = t.buf[:0]
	t.inTok = false
	return nil
}

// charAt is the 1-based character (rune) position of byte offset i, for messages.
func (t *tokenizer) charAt(i int) int { return utf8.RuneCountInString(t.s[:i]) + 1 }

var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

func parseError(detail, hint string) *Error {
	return &Error{Code: ParseError, Message: "Failed to parse command: " + detail, Hint: hint}
}
