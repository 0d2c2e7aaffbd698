package manifest

import (
	"fmt"
	"slices"
	"strings"
)

// schemaKeywords are the keywords of JSON Schema 2020-12 (core, applicator, unevaluated,
// validation, meta-data, format-annotation and content vocabularies), plus draft-07's definitions
// and dependencies, which the validator still understands.
var schemaKeywords = []string{
	"$schema", "$id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary", "$comment", "$defs", "definitions",
	"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "dependencies",
	"prefixItems", "items", "contains", "properties", "patternProperties", "additionalProperties", "propertyNames",
	"unevaluatedItems", "unevaluatedProperties",
	"type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
	"maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains", "minContains",
	"maxProperties", "minProperties", "required", "dependentRequired",
	"title", "description", "default", "deprecated", "readOnly", "writeOnly", "examples",
	"format", "contentEncoding", "contentMediaType", "contentSchema",
}

// annotationKeywords constrain nothing: a near miss of one (OpenAPI's example for examples) loses
// no check, so it is a warning, not an error.
var annotationKeywords = []string{"title", "description", "default", "deprecated", "readOnly", "writeOnly", "examples", "$comment",
	"contentEncoding", "contentMediaType"}

// Where a keyword's value holds subschemas: one schema, a map of names to schemas, or a list.
var (
	subschemaOne = []string{"not", "if", "then", "else", "contains", "additionalProperties", "propertyNames",
		"unevaluatedItems", "unevaluatedProperties", "contentSchema", "items"}
	subschemaMap  = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
	subschemaList = []string{"allOf", "anyOf", "oneOf", "prefixItems", "items"}
)

// unknownKeyword is a key of a tool's inputs or outputs schema that JSON Schema does not define.
type unknownKeyword struct {
	ptr, name, suggestion string
}

// unknownKeywords walks the schema at ptr and returns its unknown keywords in document order.
// Keys starting with "x-" are extensions and never reported.
func unknownKeywords(ptr string, v any) []unknownKeyword {
	var out []unknownKeyword
	var walk func(ptr string, v any, depth int)
	walk = func(ptr string, v any, depth int) {
		m, ok := v.(map[string]any)
		if !ok || depth > 64 {
			return
		}
		for k, sub := range m {
			at := JoinPointer(ptr, k)
			switch {
			case strings.HasPrefix(k, "x-"):
			case !slices.Contains(schemaKeywords, k):
				out = append(out, unknownKeyword{ptr: at, name: k, suggestion: nearest(k, schemaKeywords)})
			case slices.Contains(subschemaMap, k):
				if mm, ok := sub.(map[string]any); ok {
					for name, s := range mm {
						walk(JoinPointer(at, name), s, depth+1)
					}
				}
			default:
				if l, ok := sub.([]any); ok && slices.Contains(subschemaList, k) {
					for i, s := range l {
						walk(JoinPointer(at, i), s, depth+1)
					}
				} else if slices.Contains(subschemaOne, k) {
					walk(at, sub, depth+1)
				}
			}
		}
	}
	walk(ptr, v, 0)
	return out
}

// keywordRules reports the unknown keywords of the schema at ptr and whether one of them is an
// error. A near miss of a keyword that checks something (requird, minlength, tpye) is an error:
// the validator ignores unknown keywords, so the constraint the author meant is silently not
// checked. A near miss of an annotation (example for examples) and any other unknown key are
// warnings (the host ignores them; a property written beside properties instead of under it is
// the usual cause of the latter).
func (t *toolLinter) keywordRules(ptr string, v map[string]any) (hasError bool) {
	found := unknownKeywords(ptr, v)
	doc := t.c.doc
	slices.SortFunc(found, func(a, b unknownKeyword) int {
		pa, pb := doc.KeyPos(a.ptr), doc.KeyPos(b.ptr)
		if pa.Line != pb.Line {
			return pa.Line - pb.Line
		}
		return pa.Col - pb.Col
	})
	for _, u := range found {
		if u.suggestion != "" && slices.Contains(annotationKeywords, u.suggestion) {
			t.c.atKey(u.ptr, SeverityWarning, "schema-unknown-keyword", fmt.Sprintf("%s: unknown JSON Schema keyword '%s'%s", strings.TrimPrefix(u.ptr, "/"), u.name, didYouMean(u.suggestion)),
				fmt.Sprintf("rename it to %s (an annotation: nothing is checked either way)", u.suggestion))
			continue
		}
		if u.suggestion != "" {
			hasError = true
			t.c.atKey(u.ptr, SeverityError, "schema-unknown-keyword", fmt.Sprintf("%s: unknown JSON Schema keyword '%s'%s", strings.TrimPrefix(u.ptr, "/"), u.name, didYouMean(u.suggestion)),
				fmt.Sprintf("rename it to %s; an unknown keyword is ignored, so the constraint is not checked", u.suggestion))
			continue
		}
		t.c.atKey(u.ptr, SeverityWarning, "schema-unknown-keyword", fmt.Sprintf("%s: '%s' is not a JSON Schema keyword and is ignored", strings.TrimPrefix(u.ptr, "/"), u.name),
			"move a property under properties, or prefix an extension with x-")
	}
	return hasError
}
