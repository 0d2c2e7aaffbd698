package host

import (
	"context"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// sqliteBundle runs the real sqlite3 read-only on a database in the workspace, with -json. It
// prints nothing at all for a query without rows; output.empty says that means [].
func sqliteBundle(empty string) map[string]string {
	return map[string]string{
		"sqlite3/CLI.md": `---
name: SQLite
id: sqlite3
description: Query SQLite databases in the workspace.
version: 1.0.0
bin: sqlite3
install: [{ method: apt, package: sqlite3 }]
version_check: { cmd: "sqlite3 --version", parse: '^(\d+\.\d+\.\d+)', range: ">=3.30" }
sandbox:
  network: { egress: [] }
  fs: { read: ["./**"], write: [] }
  exec: { allow: false }
  env: { pass: [HOME] }
output:
  default_format: json
` + empty + `commands:
  query: ./tools/query/TOOL.md
---
`,
		"sqlite3/tools/query/TOOL.md": `---
name: Query
id: sqlite3.query
description: Run one read-only SQL query and return the rows as JSON objects.
version: 1.0.0
inputs:
  type: object
  additionalProperties: false
  properties:
    db: { type: string, format: path, pattern: "^[^-]" }
    sql: { type: string, pattern: "^[^-.]" }
  required: [db, sql]
outputs: { type: array, items: { type: object } }
runner:
  cli: ../../CLI.md
  argv: [-json, -readonly, -bail, "${input.db}", "${input.sql}"]
---
`,
	}
}

// TestSQLiteEmptyOutput: with output.empty: "[]" a query without rows returns [] (sqlite3 -json
// prints nothing); without it the call fails with output_parse_failed and a hint naming the field.
// A failing query's message is sqlite3's error line.
func TestSQLiteEmptyOutput(t *testing.T) {
	fixture.Need(t, "sqlite3")
	ws := fixture.Workspace(t)
	db := filepath.Join(ws, "data.db")
	if out, err := exec.Command("sqlite3", db, "create table t(id integer, name text); insert into t values (1, 'a');").CombinedOutput(); err != nil {
		t.Fatalf("sqlite3: %v %s", err, out)
	}
	fixture.GiveToAgent(t, ws)
	h, _ := writeBundle(t, sqliteBundle("  empty: \"[]\"\n"), Options{})
	b := bundle(t, h, "sqlite3")
	call := func(sql string) Envelope {
		return h.Call(context.Background(), b, "query", map[string]any{"db": "data.db", "sql": sql}, Caller{Workspace: ws}, CallOptions{})
	}
	if env := call("select * from t"); !env.OK || len(env.Value.([]any)) != 1 {
		t.Fatalf("rows: %+v %+v", env, env.Error)
	}
	if env := call("select * from t where id = 2"); !env.OK || !reflect.DeepEqual(env.Value, []any{}) {
		t.Fatalf("no rows: %+v %+v", env, env.Error)
	}
	if env := call("select * from nope"); env.OK || env.Error.Message != "Error: in prepare, no such table: nope" {
		t.Fatalf("error: %+v", env.Error)
	}

	h, _ = writeBundle(t, sqliteBundle(""), Options{})
	env := h.Call(context.Background(), bundle(t, h, "sqlite3"), "query", map[string]any{"db": "data.db", "sql": "select * from t where id = 2"}, Caller{Workspace: ws}, CallOptions{})
	if env.OK || env.Error.Code != "output_parse_failed" || !strings.Contains(env.Error.Hint, `empty: "[]"`) {
		t.Fatalf("undeclared empty: %+v", env.Error)
	}
}
