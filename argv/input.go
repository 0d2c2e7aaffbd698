package argv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// DecodeInput decodes a tool call's input as every front end receives it (clihostctl call
// --input, the control API, MCP's arguments, ACLI): one JSON object, numbers kept as json.Number
// so that every digit reaches the CLI as it was written (12345678901234567 stays that, not the
// float64 12345678901234568), and nothing after it but white space. Empty input and null are the
// empty object.
func DecodeInput(data []byte) (map[string]any, error) {
	if t := bytes.TrimSpace(data); len(t) == 0 || string(t) == "null" {
		return map[string]any{}, nil
	}
	v, err := DecodeValue(data)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the input must be a JSON object, not %s", kind(v))
	}
	return m, nil
}

// DecodeValue decodes one JSON value as DecodeInput does (numbers as json.Number, no trailing
// data), for values that need not be objects (ACLI's JSON option values).
func DecodeValue(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("more data after the JSON value at offset %d", dec.InputOffset())
	}
	if err := checkNumbers(v); err != nil {
		return nil, err
	}
	return v, nil
}

// The bounds of a number in an input. Schema validation computes with a number's exact value
// (math/big): 1e99999999 would take it minutes, or crash it, and no CLI takes such a number.
const (
	MaxNumberLength   = 1000 // characters of one number
	MaxNumberExponent = 1000 // magnitude of its exponent
)

// checkNumbers refuses numbers beyond MaxNumberLength and MaxNumberExponent anywhere in v.
func checkNumbers(v any) error {
	switch t := v.(type) {
	case json.Number:
		s := string(t)
		if len(s) > MaxNumberLength {
			return fmt.Errorf("a number has %d characters, more than the %d allowed", len(s), MaxNumberLength)
		}
		if i := strings.IndexAny(s, "eE"); i >= 0 {
			if e, err := strconv.Atoi(s[i+1:]); err != nil || e > MaxNumberExponent || e < -MaxNumberExponent {
				return fmt.Errorf("number %s: its exponent is beyond ±%d", s, MaxNumberExponent)
			}
		}
	case map[string]any:
		for _, x := range t {
			if err := checkNumbers(x); err != nil {
				return err
			}
		}
	case []any:
		for _, x := range t {
			if err := checkNumbers(x); err != nil {
				return err
			}
		}
	}
	return nil
}

func kind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}
