package manifest

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
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

// maxKeywordFindings bounds the unknown keywords reported one by one in one schema; one more
// finding counts the rest.
const maxKeywordFindings = 50

// unknownKeyword is a key of a tool's inputs or outputs schema that JSON Schema does not define.
type unknownKeyword struct {
	ptr, name, suggestion string
}

// unknownKeywords walks the schema at ptr in doc and returns its unknown keywords in document
// order (the YAML nodes' own order: no sorting, no position lookups). Keys starting with "x-" are
// extensions and never reported.
func unknownKeywords(doc *Document, ptr string) []unknownKeyword {
	_, root := doc.lookup(ptr)
	var out []unknownKeyword
	var walk func(ptr string, n *yaml.Node, depth int)
	walk = func(ptr string, n *yaml.Node, depth int) {
		if n == nil || n.Kind != yaml.MappingNode || depth > 64 {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, sub := n.Content[i].Value, n.Content[i+1]
			switch {
			case strings.HasPrefix(k, "x-"):
			case !slices.Contains(schemaKeywords, k):
				out = append(out, unknownKeyword{ptr: JoinPointer(ptr, k), name: k, suggestion: nearest(k, schemaKeywords)})
			case slices.Contains(subschemaMap, k):
				if sub.Kind == yaml.MappingNode {
					for j := 0; j+1 < len(sub.Content); j += 2 {
						walk(JoinPointer(ptr, k, sub.Content[j].Value), sub.Content[j+1], depth+1)
					}
				}
			case sub.Kind == yaml.SequenceNode && slices.Contains(subschemaList, k):
				for j, item := range sub.Content {
					walk(JoinPointer(ptr, k, j), item, depth+1)
				}
			case slices.Contains(subschemaOne, k) && sub.Kind == yaml.MappingNode:
				walk(JoinPointer(ptr, k), sub, depth+1)
			}
		}
	}
	walk(ptr, root, 0)
	return out
}

// keywordRules reports the unknown keywords of the schema at ptr and whether one of them is an
// error. A near miss of a keyword that checks something (requird, minlength, tpye) is an error:
// the validator ignores unknown keywords, so the constraint the author meant is silently not
// checked. A near miss of an annotation (example for examples) and any other unknown key are
// warnings (the host ignores them; a property written beside properties instead of under it is
// the usual cause of the latter).
func (t *toolLinter) keywordRules(ptr string) (hasError bool) {
	found := unknownKeywords(t.c.doc, ptr)
	for i, u := range found {
		if i == maxKeywordFindings {
			t.c.atKey(u.ptr, SeverityWarning, "schema-unknown-keyword", fmt.Sprintf("%s: and %d more unknown JSON Schema keywords", strings.TrimPrefix(ptr, "/"), len(found)-i),
				"fix the ones above first")
			for _, rest := range found[i:] {
				hasError = hasError || rest.suggestion != "" && !slices.Contains(annotationKeywords, rest.suggestion)
			}
			break
		}
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
