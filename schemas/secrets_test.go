package schemas

import "testing"

func TestSecretsSchemaCompiles(t *testing.T) {
	if _, err := Secrets(); err != nil {
		t.Fatal(err)
	}
}
