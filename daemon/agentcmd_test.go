package daemon

import "testing"

// TestShellWord: a path is printed as is when no shell treats its characters specially, else
// single-quoted so that pasting the command runs it with that very path.
func TestShellWord(t *testing.T) {
	for in, want := range map[string]string{
		"/srv/clihost/workspace": "/srv/clihost/workspace",
		"/home/me/my project":    "'/home/me/my project'",
		"/tmp/it's":              `'/tmp/it'\''s'`,
		"/tmp/$(id)":             "'/tmp/$(id)'",
		"":                       "''",
	} {
		if got := shellWord(in); got != want {
			t.Errorf("shellWord(%q) = %s, want %s", in, got, want)
		}
	}
}
