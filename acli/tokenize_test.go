package acli

import (
	"reflect"
	"strings"
	"testing"
)

// Cases ported from the reference implementation's tokenizer.test.ts and unicode-boundary.test.ts
// (as behaviour, not code), plus the places where this tokenizer deliberately differs.
func TestTokenize(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []string
	}{
		// basic
		{"splits by whitespace", "calendar events --today", []string{"calendar", "events", "--today"}},
		{"empty input", "", []string{}},
		{"multiple spaces", "foo   bar    baz", []string{"foo", "bar", "baz"}},
		{"whitespace only", "   ", []string{}},
		{"single character", "a", []string{"a"}},
		{"tabs", "foo\tbar\tbaz", []string{"foo", "bar", "baz"}},
		{"newlines and CR", "foo\nbar\r\nbaz", []string{"foo", "bar", "baz"}},
		{"leading and trailing space", "  a b  ", []string{"a", "b"}},
		// quotes
		{"double quotes", `echo "hello world"`, []string{"echo", "hello world"}},
		{"single quotes", `echo 'hello world'`, []string{"echo", "hello world"}},
		{"single quote inside double", `echo "it's working"`, []string{"echo", "it's working"}},
		{"double quote inside single", `echo 'say "hi"'`, []string{"echo", `say "hi"`}},
		{"spec: escaped double quotes", `"hello \"world\""`, []string{`hello "world"`}},
		{"spec: single quotes literal", `'hello world'`, []string{"hello world"}},
		{"adjacent quoted parts join", `a'b'"c"d`, []string{"abcd"}},
		{"quote in the middle of a word", `--name="John Smith"`, []string{"--name=John Smith"}},
		{"empty single-quoted arg kept", `echo ''`, []string{"echo", ""}},
		{"empty double-quoted arg kept", `--name "" x`, []string{"--name", "", "x"}},
		{"whitespace-only quoted arg", `--value '   '`, []string{"--value", "   "}},
		{"backslash literal in single quotes", `'a\nb\'`, []string{`a\nb\`}},
		{"single quote via close-escape-open", `'it'\''s'`, []string{"it's"}},
		// escapes
		{"spec: backslash escapes space", `hello\ world`, []string{"hello world"}},
		{"backslash escapes quote outside", `\'x\"`, []string{`'x"`}},
		{"backslash escapes backslash outside", `a\\b`, []string{`a\b`}},
		{"backslash escapes multibyte rune", `\日本`, []string{"日本"}},
		{"backslash-newline removed outside", "ab\\\ncd", []string{"abcd"}},
		{"backslash-newline alone makes no arg", "a \\\n b", []string{"a", "b"}},
		{"POSIX: \\n stays literal in double quotes", `"hello\nworld"`, []string{`hello\nworld`}},
		{"POSIX: \\t stays literal in double quotes", `"a\tb"`, []string{`a\tb`}},
		{"POSIX: escapes in double quotes", `"\"\\\$\` + "`" + `"`, []string{`"\$` + "`"}},
		{"POSIX: backslash-newline removed in double quotes", "\"a\\\nb\"", []string{"ab"}},
		{"backslash before other rune kept in double quotes", `"C:\dir\é"`, []string{`C:\dir\é`}},
		// shell metacharacters are literal text (spec §4.2.1)
		{"spec: semicolon", "calendar events; rm -rf /", []string{"calendar", "events;", "rm", "-rf", "/"}},
		{"pipe", "foo | bar", []string{"foo", "|", "bar"}},
		{"ampersands", "foo && bar &", []string{"foo", "&&", "bar", "&"}},
		{"backticks", "echo `whoami`", []string{"echo", "`whoami`"}},
		{"dollar", "echo $HOME ${X}", []string{"echo", "$HOME", "${X}"}},
		{"command substitution", "$(whoami)", []string{"$(whoami)"}},
		{"redirects", "echo foo > /etc/passwd < in 2>&1", []string{"echo", "foo", ">", "/etc/passwd", "<", "in", "2>&1"}},
		{"process substitution", "diff <(ls) >(cat)", []string{"diff", "<(ls)", ">(cat)"}},
		{"glob and tilde", "ls *.go ~/x", []string{"ls", "*.go", "~/x"}},
		{"metachars in double quotes", `"$(id); ` + "`id`" + `"`, []string{"$(id); `id`"}},
		// unicode
		{"Japanese", "echo こんにちは世界", []string{"echo", "こんにちは世界"}},
		{"Chinese", "search 你好世界", []string{"search", "你好世界"}},
		{"Korean", "search 안녕하세요", []string{"search", "안녕하세요"}},
		{"emoji", "echo 🚀🎉✨", []string{"echo", "🚀🎉✨"}},
		{"mixed ASCII and unicode", `greet --name "田中太郎" --greeting hello`, []string{"greet", "--name", "田中太郎", "--greeting", "hello"}},
		{"unicode in single quotes", "echo '日本語テスト'", []string{"echo", "日本語テスト"}},
		{"unicode in double quotes", `echo "Ünïcödë tëst"`, []string{"echo", "Ünïcödë tëst"}},
		{"unicode with spaces in quotes", `search "東京 タワー"`, []string{"search", "東京 タワー"}},
		{"diacritics", "echo café résumé naïve", []string{"echo", "café", "résumé", "naïve"}},
		{"combining marks", "echo e\u0301", []string{"echo", "e\u0301"}},
		{"full-width space separates", "echo ＦＵＬＬ　ＷＩＤＴＨ", []string{"echo", "ＦＵＬＬ", "ＷＩＤＴＨ"}},
		{"no-break space separates", "a\u00a0b", []string{"a", "b"}},
		{"RTL Arabic", "echo مرحبا", []string{"echo", "مرحبا"}},
		{"RTL Hebrew with mark", "echo \u200fשלום", []string{"echo", "\u200fשלום"}},
		{"ZWJ emoji sequence", "echo 👨‍👩‍👧‍👦", []string{"echo", "👨‍👩‍👧‍👦"}},
		{"control characters other than NUL are text", "a\x1bb", []string{"a\x1bb"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Tokenize(tc.in)
			if err != nil {
				t.Fatalf("Tokenize(%q): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Tokenize(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestTokenizeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in, msg, hint string
	}{
		{"unclosed single quote", "echo 'hello", "unclosed single quote at character 6", "Close the quote"},
		{"unclosed double quote", `echo "hello`, "unclosed double quote at character 6", "Close the quote"},
		{"unclosed quote after unicode", `日本 "x`, "at character 4", ""},
		{"escaped closing double quote", `"abc\"`, "unclosed double quote", ""},
		{"trailing backslash", `echo \`, "ends with a backslash", ""},
		{"NUL", "echo a\x00b", "NUL", ""},
		{"NUL in quotes", "'\x00'", "NUL", ""},
		{"invalid UTF-8", "echo \xff\xfe", "not valid UTF-8", ""},
		{"lone surrogate encoding", "a \xed\xa0\x80", "not valid UTF-8", ""},
		{"10,001 characters", strings.Repeat("x", 10001), "10001 characters long; the limit is 10000", ""},
		{"10,001 multibyte characters", strings.Repeat("日", 10001), "10001 characters long", ""},
		{"argument of 10,001 characters", "a " + strings.Repeat("x", 10001), "the limit is 10000", ""},
		{"101 arguments", strings.TrimSpace(strings.Repeat("a ", 101)), "more than 100 arguments", ""},
		{"101 empty arguments", strings.TrimSpace(strings.Repeat("'' ", 101)), "more than 100 arguments", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Tokenize(tc.in)
			if err == nil {
				t.Fatalf("Tokenize(%.40q) = %q, want an error", tc.in, got)
			}
			if err.Code != ParseError || !strings.HasPrefix(err.Message, "Failed to parse command: ") || !strings.Contains(err.Message, tc.msg) {
				t.Fatalf("error = %+v, want PARSE_ERROR containing %q", err, tc.msg)
			}
			if err.Hint == "" || !strings.Contains(err.Hint, tc.hint) {
				t.Fatalf("hint = %q, want one containing %q", err.Hint, tc.hint)
			}
		})
	}
}

func TestTokenizeLimits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		count int
	}{
		{"command of exactly 10,000 characters", strings.Repeat("x", 10000), 1},
		// 10,000 emoji are 40,000 bytes and 20,000 UTF-16 units (over the reference's limit); here
		// they are 10,000 characters.
		{"10,000 emoji", strings.Repeat("🚀", 10000), 1},
		{"10,000 CJK characters in two args", strings.Repeat("日", 4999) + " " + strings.Repeat("本", 5000), 2},
		{"exactly 100 arguments", strings.TrimSpace(strings.Repeat("a ", 100)), 100},
		{"exactly 100 empty arguments", strings.TrimSpace(strings.Repeat("'' ", 100)), 100},
		{"quotes do not count towards the argument", "'" + strings.Repeat("x", 9998) + "'", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Tokenize(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.count {
				t.Fatalf("got %d arguments, want %d", len(got), tc.count)
			}
		})
	}
	got, err := Tokenize(strings.Repeat("x", MaxArgLength))
	if err != nil || len(got[0]) != MaxArgLength {
		t.Fatalf("an argument of exactly MaxArgLength characters: %v", err)
	}
}
