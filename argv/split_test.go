package argv

import (
	"reflect"
	"testing"
)

func TestSplit(t *testing.T) {
	ok := map[string][]string{
		"gh --version":                           {"gh", "--version"},
		"kubectl version --client":               {"kubectl", "version", "--client"},
		`helm version --template '{{.Version}}'`: {"helm", "version", "--template", "{{.Version}}"},
		`tool "a b" c\ d 'e"f'`:                  {"tool", "a b", "c d", `e"f`},
		`tool "it's" *.go`:                       {"tool", "it's", "*.go"},
	}
	for in, want := range ok {
		got, err := Split(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Split(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a | b", "a; b", "a && b", "a > f", "X=1 a", "a $(id)", "a `id`", "a $HOME", `a "$HOME"`, "a &", "a 'unclosed", "(a)"} {
		if got, err := Split(bad); err == nil {
			t.Errorf("Split(%q) = %q, want an error", bad, got)
		}
	}
}
