package argv

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeInputKeepsEveryDigit(t *testing.T) {
	in, err := DecodeInput([]byte(`{"n": 12345678901234567, "big": 123456789012345678901234567890, "f": 0.10000000000000000001, "a": [9007199254740993]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"n": "12345678901234567", "big": "123456789012345678901234567890", "f": "0.10000000000000000001"}
	for k, w := range want {
		if n, ok := in[k].(json.Number); !ok || n.String() != w {
			t.Fatalf("%s = %#v, want json.Number %s", k, in[k], w)
		}
	}
	if a := in["a"].([]any); a[0] != json.Number("9007199254740993") {
		t.Fatalf("array item %#v", a[0])
	}
	if in, err := DecodeInput([]byte(`{"a": 1e1000, "b": 1E-1000}`)); err != nil || in["a"] != json.Number("1e1000") {
		t.Fatalf("exponents at the bound: %v %v", in, err)
	}
	for _, empty := range []string{"", "  \n", "null"} {
		if m, err := DecodeInput([]byte(empty)); err != nil || m == nil || len(m) != 0 {
			t.Fatalf("%q: %v %v", empty, m, err)
		}
	}
}

func TestDecodeInputRefuses(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1} {"b":2}`:    "more data after the JSON value",
		`{"a":1}x`:           "more data after the JSON value",
		`{"a":1}]`:           "more data after the JSON value",
		`[1,2]`:              "must be a JSON object, not an array",
		`"s"`:                "not a string",
		`12`:                 "not a number",
		`{"a":`:              "not JSON",
		`{"a":1,}`:           "not JSON",
		`{"a":[1e99999999]}`: "exponent is beyond",
		`{"a":1e-1001}`:      "exponent is beyond",
		`{"a":` + strings.Repeat("9", 1001) + `}`: "more than the 1000 allowed",
	} {
		if _, err := DecodeInput([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want %q", in, err, want)
		}
	}
}
