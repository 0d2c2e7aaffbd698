package host

import (
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/internal/wspath"
	"github.com/clihost/clihost/output"
)

// applyDefaults fills absent properties that declare a default, recursively into objects the input
// holds. Defaults come from the manifest and are copied, never shared.
func applyDefaults(schema map[string]any, input map[string]any) {
	props, _ := schema["properties"].(map[string]any)
	for name, raw := range props {
		ps, ok := raw.(map[string]any)
		if !ok {
			continue
		}
		v, present := input[name]
		if !present {
			if d, ok := ps["default"]; ok {
				input[name] = deepCopy(d)
			}
			continue
		}
		if obj, ok := v.(map[string]any); ok {
			applyDefaults(ps, obj)
		}
	}
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = deepCopy(x)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, x := range t {
			s[i] = deepCopy(x)
		}
		return s
	}
	return v
}

// validateInput checks input against the tool's compiled inputs schema.
func validateInput(s *jsonschema.Schema, input map[string]any) *Error {
	err := s.Validate(input)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &Error{Code: errcode.InputInvalid, Message: err.Error(), Hint: "check the input against the tool's input schema"}
	}
	var leaves []*jsonschema.ValidationError
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	var msgs []string
	for i, l := range leaves {
		if i == 3 {
			msgs = append(msgs, fmt.Sprintf("and %d more", len(leaves)-3))
			break
		}
		where := "input"
		if l.InstanceLocation != "" {
			where += " " + strings.TrimPrefix(l.InstanceLocation, "/")
		}
		msgs = append(msgs, where+": "+l.Message)
	}
	where := leaves[0].InstanceLocation
	return &Error{Code: errcode.InputInvalid, Message: strings.Join(msgs, "; "), Pointer: where,
		Hint: "fix the value at " + orRoot(where) + "; the tool's input schema lists each property's type and allowed values"}
}

func orRoot(p string) string {
	if p == "" {
		return "the top level"
	}
	return p
}

// firstCause is the innermost message of a validation error, with its location.
func firstCause(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	return orRoot(ve.InstanceLocation) + ": " + ve.Message
}

// checkPaths refuses (path_traversal_blocked) every input the schema declares `format: path` that
// leaves workspace (wspath.Check): absolute, ~, .. out of it, or through a symlink out of it. It
// runs in the host, so tools mode, ACLI and clihostctl call all enforce it.
func checkPaths(schema map[string]any, input map[string]any, workspace string) *Error {
	var out *Error
	_ = wspath.Walk(schema, input, "", func(ptr, v string) error {
		why, err := wspath.Check(workspace, v)
		switch {
		case err != nil:
			out = &Error{Code: errcode.InputInvalid, Message: err.Error(), Hint: "pass an existing directory as the workspace"}
		case why != "":
			out = &Error{Code: errcode.PathTraversalBlocked, Pointer: ptr, Category: output.CategoryPermission,
				Message: fmt.Sprintf("input %s %q %s", strings.TrimPrefix(ptr, "/"), v, why),
				Hint:    "use a relative path inside the workspace, such as src/main.go, without .. that leaves it"}
		default:
			return nil
		}
		return errors.New(string(out.Code))
	})
	return out
}
