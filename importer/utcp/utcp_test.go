package utcp

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// translateOne runs the translator over one tool's commands.
func translateOne(t *testing.T, commands ...string) (*converted, *Refusal) {
	t.Helper()
	ct := callTemplate{Type: "cli"}
	for _, c := range commands {
		ct.Commands = append(ct.Commands, struct {
			Command string `json:"command"`
			Append  *bool  `json:"append_to_final_output"`
		}{Command: c})
	}
	return convertTool(utcpTool{Name: "t"}, ct)
}

func TestTranslate(t *testing.T) {
	cases := []struct {
		commands []string
		steps    [][]string // program then argv templates, per step
		dirs     []string
	}{
		{[]string{"echo hello"}, [][]string{{"echo", "hello"}}, []string{""}},
		{[]string{`git log --format='%H %s' -n UTCP_ARG_n_UTCP_END`}, [][]string{{"git", "log", "--format=%H %s", "-n", "${input.n}"}}, nil},
		{[]string{`echo "a  b" c\ d 'e"f' "g\"h" "\$x"`}, [][]string{{"echo", "a  b", "c d", `e"f`, `g"h`, "$x"}}, nil},
		{[]string{`echo '${literal}' UTCP_ARG_x_UTCP_END-UTCP_ARG_y_UTCP_END`}, [][]string{{"echo", "$${literal}", "${input.x}-${input.y}"}}, nil},
		{[]string{"git status", `echo "Status: $CMD_0_OUTPUT"`, "echo $CMD_1_OUTPUT ${CMD_0_OUTPUT}"},
			[][]string{{"git", "status"}, {"echo", "Status: ${steps.0.output}"}, {"echo", "${steps.1.output}", "${steps.0.output}"}}, nil},
		{[]string{"cd UTCP_ARG_d_UTCP_END", "cd sub", "ls", "echo $CMD_2_OUTPUT"},
			[][]string{{"ls"}, {"echo", "${steps.0.output}"}}, []string{"${input.d}/sub", "${input.d}/sub"}},
		{[]string{"cd a", "cd b/../c", "pwd"}, [][]string{{"pwd"}}, []string{"a/c"}},
		{[]string{"/usr/bin/env"}, [][]string{{"/usr/bin/env"}}, nil},
		{[]string{"test -f x", "[ -f x ]"}, [][]string{{"test", "-f", "x"}, {"[", "-f", "x", "]"}}, nil},
	}
	for _, c := range cases {
		got, r := translateOne(t, c.commands...)
		if r != nil {
			t.Errorf("%q: refused: %v", c.commands, r)
			continue
		}
		var steps [][]string
		var dirs []string
		for i, s := range got.steps {
			steps = append(steps, append([]string{got.programs[i]}, s.Argv...))
			dirs = append(dirs, s.Dir)
		}
		if !slices.EqualFunc(steps, c.steps, slices.Equal) {
			t.Errorf("%q:\n got %q\nwant %q", c.commands, steps, c.steps)
		}
		if c.dirs != nil && !slices.Equal(dirs, c.dirs) {
			t.Errorf("%q: dirs %q, want %q", c.commands, dirs, c.dirs)
		}
	}
}

func TestRefusals(t *testing.T) {
	cases := []struct {
		commands  []string
		command   int
		column    int
		construct string
	}{
		{[]string{"find . -type f | wc -l"}, 0, 16, "a pipe (|)"},
		{[]string{"make 2>&1"}, 0, 7, "a redirection (>&)"},
		{[]string{"cat < in.txt"}, 0, 5, "a redirection (<)"},
		{[]string{"echo ok", "git pull && git push"}, 1, 10, "an && chain"},
		{[]string{"false || true"}, 0, 7, "an || chain"},
		{[]string{"echo a; echo b"}, 0, 9, "a command list"},
		{[]string{"echo a\necho b"}, 0, 1, "a command list"},
		{[]string{"echo `id`"}, 0, 6, "command substitution (`…`)"},
		{[]string{`echo "n=$(ls | wc -l)"`}, 0, 9, "command substitution $(…)"},
		{[]string{"echo $((1+2))"}, 0, 6, "arithmetic expansion"},
		{[]string{"diff <(ls a) <(ls b)"}, 0, 6, "process substitution"},
		{[]string{"echo ${HOME:-x}"}, 0, 6, "the parameter expansion $HOME"},
		{[]string{"echo x", "echo ${CMD_0_OUTPUT:-none}"}, 1, 6, "a parameter expansion with an operator"},
		{[]string{"echo $CMD_0_OUTPUT"}, 0, 6, "the output of a command that has not run yet"},
		{[]string{"cd sub", "echo $CMD_0_OUTPUT"}, 1, 6, "which is a cd or export"},
		{[]string{"rm *.tmp"}, 0, 4, "a glob (*)"},
		{[]string{"ls file?.txt"}, 0, 8, "a glob (?)"},
		{[]string{"ls [ab].txt"}, 0, 4, "a glob ([…])"},
		{[]string{"touch {a,b}.txt"}, 0, 7, "brace expansion"},
		{[]string{"cat ~/.ssh/id_rsa"}, 0, 5, "tilde expansion"},
		{[]string{"if true; then echo; fi"}, 0, 1, "an if clause"},
		{[]string{"(cd x)"}, 0, 1, "a subshell"},
		{[]string{"for f in a b; do echo $f; done"}, 0, 1, "a for loop"},
		{[]string{"sleep 5 &"}, 0, 9, "a background job"},
		{[]string{"sh -c 'id'"}, 0, 1, "a shell (sh)"},
		{[]string{"/bin/bash script.sh"}, 0, 1, "a shell (/bin/bash)"},
		{[]string{"source env.sh"}, 0, 1, "the shell builtin source"},
		{[]string{"FOO=bar"}, 0, 1, "a shell variable assignment"},
		{[]string{"local x=1"}, 0, 1, "the shell builtin local"},
		{[]string{"./run.sh"}, 0, 1, `the program "./run.sh"`},
		{[]string{"UTCP_ARG_prog_UTCP_END --help"}, 0, 1, "a program named by an argument"},
		{[]string{"cd /tmp", "ls"}, 0, 4, "cd to the absolute path /tmp"},
		{[]string{"cd ..", "ls"}, 0, 0, "outside the workspace"},
		{[]string{"cd"}, 0, 1, "cd without exactly one directory"},
		{[]string{"echo $'a\\n'"}, 0, 6, "$'…' quoting"},
		{[]string{"echo 'unterminated"}, 0, 6, "a shell syntax error"},
		{[]string{"echo '$'UTCP_ARG_x_UTCP_END"}, 0, 9, "a literal $ right before"},
		{[]string{"cd x"}, -1, 0, "no command runs a program"},
	}
	for _, c := range cases {
		_, r := translateOne(t, c.commands...)
		if r == nil {
			t.Errorf("%q: not refused", c.commands)
			continue
		}
		if r.Command != c.command || r.Column != c.column || !strings.Contains(r.Construct, c.construct) || r.Tool != "t" {
			t.Errorf("%q: got command %d column %d %q, want command %d column %d %q", c.commands, r.Command, r.Column, r.Construct, c.command, c.column, c.construct)
		}
		if msg := r.Error(); !strings.Contains(msg, `tool "t"`) || !strings.Contains(msg, c.construct) {
			t.Errorf("%q: message %q", c.commands, msg)
		}
	}
}

func TestCallTemplateRefusals(t *testing.T) {
	for _, c := range []struct {
		ct   string
		want string
	}{
		{`{"call_template_type":"cli","commands":[{"command":"ls"}],"working_dir":"/tmp"}`, `working_dir "/tmp" is outside the workspace`},
		{`{"call_template_type":"cli","commands":[{"command":"ls"}],"env_vars":{"TOKEN":"${API_KEY}"}}`, "takes the value of the UTCP variable API_KEY"},
		{`{"call_template_type":"cli","commands":[]}`, "no commands"},
	} {
		var ct callTemplate
		if err := json.Unmarshal([]byte(c.ct), &ct); err != nil {
			t.Fatal(err)
		}
		_, r := convertTool(utcpTool{Name: "t"}, ct)
		if r == nil || r.Command != -1 || !strings.Contains(r.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.ct, r, c.want)
		}
	}
	var ct callTemplate
	_ = json.Unmarshal([]byte(`{"call_template_type":"cli","commands":[{"command":"ls"}],"working_dir":"src","env_vars":{"API_KEY":"${API_KEY}","MODE":"fast"},"inherit_env_vars":["PATH"]}`), &ct)
	c, r := convertTool(utcpTool{Name: "t"}, ct)
	if r != nil {
		t.Fatal(r)
	}
	if s := c.steps[0]; s.Dir != "src" || s.Env["MODE"] != "fast" || len(s.Env) != 1 || !slices.Equal(c.pass, []string{"API_KEY", "PATH"}) {
		t.Errorf("working_dir, env_vars, inherit_env_vars: %+v pass %q", s, c.pass)
	}
}

func TestConvertManual(t *testing.T) {
	b := convertManual(t)
	if want := []string{"echo_chain", "read_name", "append_some", "show_env", "always_fails", "git_ref", "warned", "padded"}; !slices.Equal(b.Tools, want) {
		t.Errorf("tools %q, want %q", b.Tools, want)
	}
	var refused []string
	for _, r := range b.Refused {
		refused = append(refused, r.Tool)
	}
	if want := []string{"count_files", "save", "status_and", "whoami_subst", "list_txt", "home_var", "two_commands", "abs_dir", "shell_c"}; !slices.Equal(refused, want) {
		t.Errorf("refused %q, want %q", refused, want)
	}
	if !slices.Equal(b.Skipped, []string{"weather (http)"}) {
		t.Errorf("skipped %q", b.Skipped)
	}
	cli := string(b.Files["CLI.md"])
	for _, want := range []string{"bin: echo\n", "spawn:\n      - \"false\"\n      - git\n      - jq\n      - printenv\n      - printf\n", "allow: true"} {
		if !strings.Contains(cli, want) {
			t.Errorf("CLI.md lacks %q:\n%s", want, cli)
		}
	}
	if _, err := Convert([]byte(`{"tools":[{"name":"x","tool_call_template":{"call_template_type":"cli","commands":[{"command":"a | b"}]}}]}`), Options{ID: "x1"}); err == nil {
		t.Error("a manual whose tools are all refused converted")
	}
	// The pre-1.0 tool_provider key is read too.
	legacy := `{"tools":[{"name":"ver","tool_provider":{"provider_type":"cli","commands":[{"command":"git --version"}]}}]}`
	if _, err := Convert([]byte(legacy), Options{ID: "Bad ID"}); err == nil {
		t.Error("a bad id was accepted")
	}
	if b, err := Convert([]byte(legacy), Options{ID: "legacy"}); err != nil || len(b.Tools) != 1 {
		t.Errorf("legacy tool_provider: %v", err)
	}
}

// convertManual converts testdata/manual.json as bundle utcp-demo.
func convertManual(t *testing.T) *Bundle {
	t.Helper()
	data, err := os.ReadFile("testdata/manual.json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Convert(data, Options{ID: "utcp-demo"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
