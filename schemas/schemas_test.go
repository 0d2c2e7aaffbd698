package schemas

import "testing"

func TestSchemasCompile(t *testing.T) {
	if _, err := CLI(); err != nil {
		t.Fatal(err)
	}
	if _, err := Tool(); err != nil {
		t.Fatal(err)
	}
}
