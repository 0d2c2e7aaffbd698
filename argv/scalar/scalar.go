// Package scalar renders one JSON value (a string, number or boolean) as one command-line
// argument. It is a leaf, shared by argv (the template language) and cobramcp (the Cobra → MCP
// bridge linked into other programs, which must stay light).
package scalar

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// String renders a string, number or boolean as one argument: strings as they are, numbers without
// exponent, booleans as true/false. Anything else (null, arrays, objects) is an error.
func String(v any) (string, error) {
	switch t := v.(type) {
	case string:
		return t, nil
	case bool:
		return strconv.FormatBool(t), nil
	case json.Number:
		return t.String(), nil
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			return "", fmt.Errorf("number %v cannot be an argument", t)
		}
		return strconv.FormatFloat(t, 'f', -1, 64), nil
	case int:
		return strconv.Itoa(t), nil
	case int64:
		return strconv.FormatInt(t, 10), nil
	}
	return "", fmt.Errorf("want a string, number or boolean, got %T", v)
}
