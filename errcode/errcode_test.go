package errcode

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// constDoc is one code as errcode.go declares it: its constant's name, value and doc comment.
type constDoc struct {
	name string
	code Code
	doc  string
}

// declared parses errcode.go for its Code constants, in order.
func declared(t *testing.T) []constDoc {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "errcode.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var out []constDoc
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			lit, ok := v.Values[0].(*ast.BasicLit)
			if !ok {
				t.Fatalf("%s is not a string literal", v.Names[0].Name)
			}
			val, _ := strconv.Unquote(lit.Value)
			doc := strings.Join(strings.Fields(v.Doc.Text()), " ")
			doc = strings.TrimPrefix(doc, v.Names[0].Name+": ")
			out = append(out, constDoc{name: v.Names[0].Name, code: Code(val), doc: doc})
		}
	}
	return out
}

// table renders the codes as docs/errors.md shows them.
func table(cs []constDoc) string {
	var b strings.Builder
	b.WriteString("| code | constant | meaning, producer, what to do |\n| --- | --- | --- |\n")
	for _, c := range cs {
		b.WriteString("| `" + string(c.code) + "` | `errcode." + c.name + "` | " + strings.ReplaceAll(c.doc, "|", `\|`) + " |\n")
	}
	return b.String()
}

// TestDocumented holds errcode.go, All and docs/errors.md together: every constant is documented,
// listed in All, and rendered (its comment verbatim) in the table of docs/errors.md.
func TestDocumented(t *testing.T) {
	cs := declared(t)
	var codes []Code
	for _, c := range cs {
		if c.doc == "" || !strings.Contains(c.doc, ".") {
			t.Errorf("%s has no documentation", c.name)
		}
		codes = append(codes, c.code)
	}
	if !slices.Equal(codes, All) {
		t.Errorf("All = %v, want the constants in order: %v", All, codes)
	}
	doc, err := os.ReadFile("../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := table(cs); !strings.Contains(string(doc), want) {
		t.Errorf("docs/errors.md does not hold the table of errcode.go's constants; it should read:\n%s", want)
	}
}

// TestNoRawCodes keeps the codes in this package: no non-test Go file elsewhere builds an error
// (Code: "x", fail("x", …), x.Code = "x") or compares one (x.Code == "x", code != "x", case "x" in
// a switch on a code) with a string literal. Package acli is exempt: its codes are the ACLI
// protocol's (CommandNotFound, …), declared as its own constants.
func TestNoRawCodes(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var bad []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", "testdata", ".git", "errcode", "acli":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, pos := range rawCodes(f) {
			bad = append(bad, fset.Position(pos).String())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("error codes as string literals (use package errcode):\n%s", strings.Join(bad, "\n"))
	}
	// A positive control: the checker finds each form it looks for.
	src := `package p
func f(e *E, code string) {
	_ = E{Code: "x"}
	_ = fail("x", "", "")
	_ = fail("a reason", nil)
	_ = e.Code != ""
	e.Code = "x"
	_ = e.Code == "x" || code != "x" || "x" == e.Code
	switch e.Code {
	case "x":
	}
}`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rawCodes(f)); n != 7 {
		t.Errorf("the checker found %d raw codes in its control, want 7", n)
	}
}

// codeLike is what a code looks like: one snake_case word ("" is no code; "login cancelled", the
// reason authstate's own fail takes, is none either).
var codeLike = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// rawCodes returns where f builds or compares an error code with a string literal.
func rawCodes(f *ast.File) []token.Pos {
	var out []token.Pos
	isStr := func(e ast.Expr) bool {
		l, ok := e.(*ast.BasicLit)
		if !ok || l.Kind != token.STRING {
			return false
		}
		v, err := strconv.Unquote(l.Value)
		return err == nil && codeLike.MatchString(v)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.KeyValueExpr:
			if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Code" && isStr(n.Value) {
				out = append(out, n.Pos())
			}
		case *ast.CallExpr:
			if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "fail" && len(n.Args) > 0 && isStr(n.Args[0]) {
				out = append(out, n.Pos())
			}
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				if isCode(l) && i < len(n.Rhs) && isStr(n.Rhs[i]) {
					out = append(out, n.Pos())
				}
			}
		case *ast.BinaryExpr:
			if (n.Op == token.EQL || n.Op == token.NEQ) &&
				(isCode(n.X) && isStr(n.Y) || isStr(n.X) && isCode(n.Y)) {
				out = append(out, n.Pos())
			}
		case *ast.SwitchStmt:
			if n.Tag == nil || !isCode(n.Tag) {
				return true
			}
			for _, s := range n.Body.List {
				for _, e := range s.(*ast.CaseClause).List {
					if isStr(e) {
						out = append(out, e.Pos())
					}
				}
			}
		}
		return true
	})
	return out
}

// isCode reports whether e names an error code: a field Code or a variable code.
func isCode(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		return e.Sel.Name == "Code"
	case *ast.Ident:
		return e.Name == "code"
	}
	return false
}
