package utcp

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// placeholder is UTCP's argument placeholder, as the reference implementations match it.
var placeholder = regexp.MustCompile(`UTCP_ARG_([a-zA-Z0-9_]+?)_UTCP_END`)

// outputRef is the name of the variable holding command N's output in UTCP's generated script.
var outputRef = regexp.MustCompile(`^CMD_(\d+)_OUTPUT$`)

// templateName is what ${input.NAME} accepts (manifest's isName).
var templateName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_\-]*$`)

// shells are programs that would run a shell after all; a command that starts one is refused.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "yash": true,
	"fish": true, "csh": true, "tcsh": true, "busybox": true, "pwsh": true, "powershell": true}

// builtins are shell builtins with no program of the same name that could stand in for them
// (echo, printf, test, pwd, true, false and kill have one and run as that program).
var builtins = map[string]bool{"alias": true, "bg": true, "bind": true, "break": true, "builtin": true, "caller": true,
	"command": true, "compgen": true, "complete": true, "continue": true, "dirs": true, "disown": true, "enable": true,
	"eval": true, "exec": true, "exit": true, "fc": true, "fg": true, "getopts": true, "hash": true, "help": true,
	"history": true, "jobs": true, "logout": true, "mapfile": true, "popd": true, "pushd": true, "read": true,
	"readarray": true, "return": true, "set": true, "shift": true, "shopt": true, "source": true, ".": true,
	"suspend": true, "times": true, "trap": true, "type": true, "ulimit": true, "umask": true, "unalias": true,
	"unset": true, "wait": true, ":": true}

// command is one UTCP command string translated: a step, or a change of directory or environment
// for the steps after it.
type command struct {
	program string            // the program of a step ("" for cd and export)
	argv    []string          // argv templates after the program
	env     map[string]string // NAME=value prefixes of this command (templates)
	cd      string            // cd's target (a template), when the command is a cd
	isCD    bool
	export  map[string]string // export NAME=value: for this and every later step
}

// translator turns the command strings of one UTCP tool into steps.
type translator struct {
	tool   string
	index  int    // the command being translated (0-based)
	text   string // its text
	stepOf []int  // UTCP command index → step index, -1 for cd and export
	inputs map[string]bool
}

// refuse builds the refusal of the current command at pos.
func (tr *translator) refuse(pos syntax.Pos, construct string) *Refusal {
	r := &Refusal{Tool: tr.tool, Command: tr.index, Text: tr.text, Construct: construct}
	if pos.IsValid() {
		r.Line, r.Column = int(pos.Line()), int(pos.Col())
	}
	return r
}

// refuseWhy is refuse for a construct that cannot be expressed for another reason than needing a
// shell.
func (tr *translator) refuseWhy(pos syntax.Pos, construct, reason string) *Refusal {
	r := tr.refuse(pos, construct)
	r.Reason = reason
	return r
}

// refuseAt is refuse at a byte offset after pos on the same line.
func (tr *translator) refuseAt(pos syntax.Pos, off int, construct string) *Refusal {
	r := tr.refuse(pos, construct)
	if r.Column > 0 {
		r.Column += off
	}
	return r
}

// translate parses one command string and maps it onto a step (or a cd / export).
func (tr *translator) translate() (*command, *Refusal) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(tr.text), "")
	if err != nil {
		r := &Refusal{Tool: tr.tool, Command: tr.index, Text: tr.text, Construct: "a syntax error: " + err.Error()}
		if pe, ok := err.(syntax.ParseError); ok {
			r.Line, r.Column, r.Construct = int(pe.Pos.Line()), int(pe.Pos.Col()), "a shell syntax error: "+pe.Text
		}
		return nil, r
	}
	switch len(f.Stmts) {
	case 0:
		return nil, tr.refuse(syntax.Pos{}, "an empty command")
	case 1:
	default:
		return nil, tr.refuse(f.Stmts[1].Pos(), "a command list (; or a newline between commands)")
	}
	st := f.Stmts[0]
	switch {
	case st.Negated:
		return nil, tr.refuse(st.Pos(), "negation (!)")
	case st.Background:
		return nil, tr.refuse(st.Semicolon, "a background job (&)")
	case st.Coprocess || st.Disown:
		return nil, tr.refuse(st.Semicolon, "a coprocess")
	case len(st.Redirs) > 0:
		return nil, tr.refuse(st.Redirs[0].OpPos, fmt.Sprintf("a redirection (%s)", st.Redirs[0].Op))
	case st.Semicolon.IsValid():
		return nil, tr.refuse(st.Semicolon, "a command list (;)")
	}
	switch c := st.Cmd.(type) {
	case *syntax.CallExpr:
		return tr.call(c)
	case *syntax.DeclClause:
		return tr.decl(c)
	case *syntax.BinaryCmd:
		what := map[syntax.BinCmdOperator]string{syntax.AndStmt: "an && chain", syntax.OrStmt: "an || chain",
			syntax.Pipe: "a pipe (|)", syntax.PipeAll: "a pipe (|&)"}[c.Op]
		if what == "" {
			what = "the operator " + c.Op.String()
		}
		return nil, tr.refuse(c.OpPos, what)
	case nil:
		return nil, tr.refuse(st.Pos(), "an empty command")
	default:
		return nil, tr.refuse(st.Cmd.Pos(), compoundName(st.Cmd))
	}
}

// compoundName names a compound command for a refusal.
func compoundName(c syntax.Command) string {
	switch c.(type) {
	case *syntax.Subshell:
		return "a subshell ( … )"
	case *syntax.Block:
		return "a block { … }"
	case *syntax.IfClause:
		return "an if clause"
	case *syntax.WhileClause:
		return "a while or until loop"
	case *syntax.ForClause:
		return "a for loop"
	case *syntax.CaseClause:
		return "a case clause"
	case *syntax.FuncDecl:
		return "a function definition"
	case *syntax.ArithmCmd:
		return "an arithmetic command (( … ))"
	case *syntax.TestClause:
		return "a test clause [[ … ]]"
	case *syntax.LetClause:
		return "a let clause"
	case *syntax.TimeClause:
		return "a time clause"
	case *syntax.CoprocClause:
		return "a coprocess"
	}
	return fmt.Sprintf("a shell construct (%T)", c)
}

// call translates a simple command: NAME=value prefixes, the program and its arguments.
func (tr *translator) call(c *syntax.CallExpr) (*command, *Refusal) {
	if len(c.Args) == 0 {
		return nil, tr.refuse(c.Pos(), "a shell variable assignment without a command (shell state)")
	}
	out := &command{}
	for _, a := range c.Assigns {
		name, value, r := tr.assign(a)
		if r != nil {
			return nil, r
		}
		if out.env == nil {
			out.env = map[string]string{}
		}
		out.env[name] = value
	}
	prog, literal, r := tr.word(c.Args[0])
	if r != nil {
		return nil, r
	}
	if !literal {
		return nil, tr.refuse(c.Args[0].Pos(), "a program named by an argument or a step's output")
	}
	prog = strings.ReplaceAll(prog, "$${", "${")
	switch {
	case prog == "cd":
		if len(c.Assigns) > 0 {
			return nil, tr.refuse(c.Pos(), "a variable assignment before cd")
		}
		return tr.cd(c)
	case shells[path.Base(prog)]:
		return nil, tr.refuse(c.Args[0].Pos(), fmt.Sprintf("a shell (%s)", prog))
	case builtins[prog]:
		return nil, tr.refuse(c.Args[0].Pos(), fmt.Sprintf("the shell builtin %s", prog))
	case prog == "" || (strings.Contains(prog, "/") && !path.IsAbs(prog)):
		return nil, tr.refuse(c.Args[0].Pos(), fmt.Sprintf("the program %q (a program is a name on PATH or an absolute path)", prog))
	}
	out.program = prog
	for _, w := range c.Args[1:] {
		t, _, r := tr.word(w)
		if r != nil {
			return nil, r
		}
		out.argv = append(out.argv, t)
	}
	out.argv = glueOptionValues(prog, out.argv)
	return out, nil
}

// longOption is a literal long option without a value: --name.
var longOption = regexp.MustCompile(`^--[A-Za-z0-9][A-Za-z0-9-]*$`)

// unglued are programs whose option parsers do not read --name=VALUE as an option and its value
// (curl and jq take a value only as the next argument, and report --name=VALUE as unknown).
var unglued = map[string]bool{"curl": true, "jq": true}

// glueOptionValues writes a literal long option and the argument after it as one argument,
// --name=VALUE, when that argument begins with a placeholder or a step's output: standing alone, a
// value starting with '-' would be refused at call time (the CLI could read it as an option), and
// glued the CLI reads it as the option's value whatever it holds. Nothing after a literal "--" is
// glued (it is positional), nor the arguments of programs in unglued. A short option (-n VALUE) is
// left as written: -la PATH is as likely as -n VALUE, and -laPATH would be wrong, so a value
// starting with '-' stays refused there (lint warns: argv-option-value).
func glueOptionValues(prog string, argv []string) []string {
	if unglued[path.Base(prog)] {
		return argv
	}
	var out []string
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			return append(out, argv[i:]...)
		}
		if longOption.MatchString(a) && i+1 < len(argv) && startsWithValue(argv[i+1]) {
			a += "=" + argv[i+1]
			i++
		}
		out = append(out, a)
	}
	return out
}

// startsWithValue reports whether an argument template begins with a placeholder or a step's
// output (a literal "${" is written "$${").
func startsWithValue(arg string) bool {
	return strings.HasPrefix(arg, "${input.") || strings.HasPrefix(arg, "${steps.")
}

// cd translates `cd DIR`.
func (tr *translator) cd(c *syntax.CallExpr) (*command, *Refusal) {
	if len(c.Args) != 2 {
		return nil, tr.refuse(c.Args[0].Pos(), "cd without exactly one directory (cd alone goes to the home directory)")
	}
	dir, literal, r := tr.word(c.Args[1])
	if r != nil {
		return nil, r
	}
	if literal {
		d := strings.ReplaceAll(dir, "$${", "${")
		if d == "-" || strings.HasPrefix(d, "-") {
			return nil, tr.refuse(c.Args[1].Pos(), fmt.Sprintf("cd %s", d))
		}
		if path.IsAbs(d) {
			return nil, tr.refuseWhy(c.Args[1].Pos(), fmt.Sprintf("cd to the absolute path %s", d), "steps run inside the caller's workspace")
		}
	}
	return &command{isCD: true, cd: dir}, nil
}

// decl translates `export NAME=value …`; the other declaration builtins are refused.
func (tr *translator) decl(d *syntax.DeclClause) (*command, *Refusal) {
	if d.Variant == nil || d.Variant.Value != "export" || len(d.Args) == 0 {
		v := "declare"
		if d.Variant != nil {
			v = d.Variant.Value
		}
		return nil, tr.refuse(d.Pos(), fmt.Sprintf("the shell builtin %s", v))
	}
	out := &command{export: map[string]string{}}
	for _, a := range d.Args {
		name, value, r := tr.assign(a)
		if r != nil {
			return nil, r
		}
		out.export[name] = value
	}
	return out, nil
}

// assign translates NAME=value.
func (tr *translator) assign(a *syntax.Assign) (string, string, *Refusal) {
	switch {
	case a.Name == nil || a.Naked || a.Value == nil:
		return "", "", tr.refuse(a.Pos(), "a variable without a value")
	case a.Append || a.Index != nil || a.Array != nil:
		return "", "", tr.refuse(a.Pos(), "an array or += assignment")
	}
	v, _, r := tr.word(a.Value)
	if r != nil {
		return "", "", r
	}
	return a.Name.Value, v, nil
}

// segment is a piece of a translated word: literal text or a template expression.
type segment struct {
	text string
	expr bool
	pos  syntax.Pos
}

// word translates one shell word into an argv template entry. literal reports that it holds no
// expression. Inside double quotes, only step outputs and placeholders expand.
func (tr *translator) word(w *syntax.Word) (tmpl string, literal bool, r *Refusal) {
	var segs []segment
	for i, p := range w.Parts {
		if r := tr.part(p, i == 0, false, &segs); r != nil {
			return "", false, r
		}
	}
	var b strings.Builder
	literal = true
	for i, s := range segs {
		if !s.expr {
			b.WriteString(strings.ReplaceAll(s.text, "${", "$${"))
			continue
		}
		literal = false
		if i > 0 && !segs[i-1].expr && strings.HasSuffix(segs[i-1].text, "$") {
			return "", false, tr.refuseWhy(s.pos, "a literal $ right before a placeholder or step output", "the argv template language cannot write it")
		}
		b.WriteString(s.text)
	}
	return b.String(), literal, nil
}

// part translates one word part, appending to segs.
func (tr *translator) part(p syntax.WordPart, first, quoted bool, segs *[]segment) *Refusal {
	switch x := p.(type) {
	case *syntax.Lit:
		raw := x.Value
		if !quoted {
			if r := tr.globs(x, first); r != nil {
				return r
			}
			return tr.literal(unescape(raw, false), x.Pos(), segs)
		}
		return tr.literal(unescape(raw, true), x.Pos(), segs)
	case *syntax.SglQuoted:
		if x.Dollar {
			return tr.refuse(x.Pos(), "$'…' quoting")
		}
		return tr.literal(x.Value, x.Pos(), segs)
	case *syntax.DblQuoted:
		if x.Dollar {
			return tr.refuse(x.Pos(), `$"…" quoting`)
		}
		if len(x.Parts) == 0 {
			*segs = append(*segs, segment{text: ""})
		}
		for _, q := range x.Parts {
			if r := tr.part(q, false, true, segs); r != nil {
				return r
			}
		}
		return nil
	case *syntax.ParamExp:
		return tr.param(x, segs)
	case *syntax.CmdSubst:
		if x.Backquotes {
			return tr.refuse(x.Pos(), "command substitution (`…`)")
		}
		return tr.refuse(x.Pos(), "command substitution $(…)")
	case *syntax.ArithmExp:
		return tr.refuse(x.Pos(), "arithmetic expansion $((…))")
	case *syntax.ProcSubst:
		return tr.refuse(x.Pos(), "process substitution")
	case *syntax.ExtGlob:
		return tr.refuse(x.Pos(), "an extended glob")
	case *syntax.BraceExp:
		return tr.refuse(x.Pos(), "brace expansion")
	}
	return tr.refuse(p.Pos(), fmt.Sprintf("a shell construct (%T)", p))
}

// param translates $NAME / ${NAME}: only $CMD_N_OUTPUT of an earlier command that ran a program.
func (tr *translator) param(x *syntax.ParamExp, segs *[]segment) *Refusal {
	simple := x.Param != nil && x.Flags == nil && !x.Excl && !x.Length && !x.Width && !x.IsSet && x.NestedParam == nil &&
		x.Index == nil && len(x.Modifiers) == 0 && x.Slice == nil && x.Repl == nil && x.Names == 0 && x.Exp == nil &&
		x.Split == syntax.OptUnset && x.GlobSubst == syntax.OptUnset && x.RcExpand == syntax.OptUnset
	name := ""
	if x.Param != nil {
		name = x.Param.Value
	}
	m := outputRef.FindStringSubmatch(name)
	switch {
	case m == nil:
		return tr.refuse(x.Pos(), fmt.Sprintf("the parameter expansion $%s (only $CMD_N_OUTPUT, a step's output, expands)", name))
	case !simple:
		return tr.refuse(x.Pos(), fmt.Sprintf("a parameter expansion with an operator on $%s", name))
	}
	n, err := strconv.Atoi(m[1])
	switch {
	case err != nil || n >= tr.index:
		return tr.refuse(x.Pos(), fmt.Sprintf("$%s, the output of a command that has not run yet", name))
	case tr.stepOf[n] < 0:
		return tr.refuse(x.Pos(), fmt.Sprintf("$%s, the output of command %d, which is a cd or export and prints nothing", name, n))
	}
	*segs = append(*segs, segment{text: fmt.Sprintf("${steps.%d.output}", tr.stepOf[n]), expr: true, pos: x.Pos()})
	return nil
}

// text appends literal text, turning UTCP placeholders into ${input.NAME}.
func (tr *translator) literal(s string, pos syntax.Pos, segs *[]segment) *Refusal {
	for s != "" {
		loc := placeholder.FindStringSubmatchIndex(s)
		if loc == nil {
			*segs = append(*segs, segment{text: s})
			return nil
		}
		if loc[0] > 0 {
			*segs = append(*segs, segment{text: s[:loc[0]]})
		}
		name := s[loc[2]:loc[3]]
		if !templateName.MatchString(name) {
			return tr.refuseWhy(pos, fmt.Sprintf("the placeholder name %q", name), "clihost input names start with a letter or _")
		}
		tr.inputs[name] = true
		*segs = append(*segs, segment{text: "${input." + name + "}", expr: true, pos: pos})
		s = s[loc[1]:]
	}
	return nil
}

// globs refuses the unquoted, unescaped pathname expansion and brace expansion characters of a
// literal, and a leading ~.
func (tr *translator) globs(x *syntax.Lit, first bool) *Refusal {
	raw := x.Value
	if first && strings.HasPrefix(raw, "~") {
		return tr.refuse(x.Pos(), "tilde expansion (~)")
	}
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '\\':
			i++
		case '*', '?':
			return tr.refuseAt(x.Pos(), i, fmt.Sprintf("a glob (%c)", raw[i]))
		case '[':
			if strings.Contains(raw[i+1:], "]") {
				return tr.refuseAt(x.Pos(), i, "a glob ([…])")
			}
		case '{':
			if end := strings.IndexByte(raw[i:], '}'); end > 0 {
				inner := raw[i+1 : i+end]
				if strings.Contains(inner, ",") || strings.Contains(inner, "..") {
					return tr.refuseAt(x.Pos(), i, "brace expansion ({…})")
				}
			}
		}
	}
	return nil
}

// unescape removes the shell's backslashes from a literal: every one outside quotes (a
// backslash-newline disappears), and inside double quotes only those before $ ` " \ and newline.
func unescape(raw string, dquoted bool) string {
	if !strings.Contains(raw, `\`) {
		return raw
	}
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' || i+1 == len(raw) {
			b.WriteByte(c)
			continue
		}
		next := raw[i+1]
		switch {
		case next == '\n':
			i++
		case !dquoted || strings.IndexByte("$`\"\\", next) >= 0:
			b.WriteByte(next)
			i++
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
