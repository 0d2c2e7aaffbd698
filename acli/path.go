package acli

import (
	"fmt"

	"github.com/clihost/clihost/internal/wspath"
)

// checkPath enforces spec §4.2.3 on a `format: path` value v (displayed as display): it is
// PATH_TRAVERSAL_BLOCKED when wspath.Check refuses it. The value itself is passed on unchanged.
func checkPath(workspace, display, v string) *Error {
	why, err := wspath.Check(workspace, v)
	if err != nil {
		return &Error{Code: ExecutionError, Message: "Execution failed: " + err.Error(), Hint: "Check that the workspace directory exists"}
	}
	if why != "" {
		return blocked(display, v, why)
	}
	return nil
}

func blocked(display, v, why string) *Error {
	return &Error{Code: PathTraversalBlocked,
		Message: fmt.Sprintf("Path traversal blocked: %s %s %s", display, quoteClip(v), why),
		Hint:    "Use a relative path inside the workspace, such as src/main.go, without .. that leaves it"}
}
